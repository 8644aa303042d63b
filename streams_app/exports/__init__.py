"""Export a stream's range, or the entries of it a search matches, as NDJSON, CSV or Parquet.

The reader (:mod:`.reader`) pages through the range with XRANGE ... COUNT (never ``XRANGE - +``), keeps
the entries an optional predicate ``matches(entry) -> bool`` accepts (:func:`.reader.export_matcher`,
the one place a search query is wired in), and encodes each page as it comes (:mod:`.formats`), so a
download holds one page (1000 entries) in memory. Big ranges are written by a background job
(:mod:`.files`), resumable part by part, to ``BUSCONSOLE_EXPORT_DIR``, kept
``BUSCONSOLE_EXPORT_RETENTION_H`` hours.

**Range.** ``from``..``to``, both included: entry IDs, millisecond times or ISO-8601 times (a time
covers its whole millisecond at either end), ``-`` and ``+``; the end is fixed at the stream's last ID
when the export starts.

**Formats** (what a user of each gets):

* NDJSON, lossless: one object per entry, ``{"id", "time", "fields": {name: text}}``; ``time`` is the
  ID's time, ISO 8601 UTC to the millisecond; texts are UTF-8 with any other byte as ``\\xNN`` (the
  console's text form, NUL as ``\\x00``). ``decoded`` holds the JSON value of each field whose value is
  a JSON object or array (up to 64 KiB). When the texts lose something (a name or value that is not
  UTF-8, or a name used twice in the entry, which ``fields`` as an object cannot hold), ``raw`` lists
  every ``[name, value]`` pair in base64, in Redis's order.
* CSV, for spreadsheets (texts only, UTF-8, RFC 4180, every cell quoted): ``id``, ``time``, then one
  column per field name seen in the first page read (at most 200, in order of first appearance), named
  ``fields.<name>`` so that no field (``id``, ``time``, the empty name) can take an entry column's name,
  then ``other_fields``: a JSON list of ``[name, value]`` for the fields of an entry that
  have no column (a name first seen later, a repeated name, a name that reads like an earlier one). A
  bounded header that never needs a second pass. Formula injection (OWASP): a cell whose text starts
  with ``=``, ``+``, ``-``, ``@``, tab or CR, after any leading ``'``, is written with one more ``'`` in
  front, which a spreadsheet shows as text. To get the values back, strip one leading ``'`` from a
  cell whose text after its leading quotes starts with one of those six; leave every other cell.
* Parquet, lossless: ``id`` (string), ``time`` (timestamp ms, UTC), ``fields`` (list of
  ``{name, value}`` texts, in order) and ``fields_raw`` (the same pairs as bytes, set only when the
  texts lose something, as NDJSON's ``raw``); zstd, one row group per page.
"""
