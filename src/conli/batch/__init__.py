"""``conli batch``'s engines: records in, results out, resumable (a front door's room).

``records`` reads IN and writes OUT, ``summary`` counts a run, ``tally`` a record's model
calls, ``work`` runs one record, ``local`` schedules them on threads in this process and
``ray_engine`` on a Ray cluster (its actors: ``ray_actors``). Above the check; nothing
below imports it.
"""
