"""The incident timeline: DLQ depth, lag and pending, stuck consumers, alerts, operator actions and
annotations of a connection or a stream on one time axis (:mod:`.window` for the window in the address,
:mod:`.tracks` for what is drawn)."""
