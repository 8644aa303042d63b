"""Masking of payload values by rule and role (docs/api.md#masking).

Rules come from ``BUSCONSOLE_MASK_RULES`` and from the admin page (:class:`.models.MaskRule`); one
function applies them, :func:`.apply.masker_for`, wherever a payload leaves the server. See
:mod:`.apply` for the design (who sees what, the reveal and its audit row).
"""
