"""Saved views: a named link to a console page with its query string.

Every page keeps its filters, sort and position in its URL, so a view is nothing more than that URL
and a name: opening one is following the link. The model and the check that a saved URL is a page
of this console (never another site) live here; saving, renaming and deleting go through
:mod:`streams_app.services.saved_views`, on the role-and-audit path of every other action.
"""
