"""``conli report``: a results file as one self-contained HTML audit page (a front door's room).

``records`` reads the results, ``coverage`` gives the coverage and word parts, ``html``
renders the page from ``report/templates``.
"""
