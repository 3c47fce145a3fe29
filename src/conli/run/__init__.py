"""What a run is, in one room: its request, its plan, its context, and the doors' shared parts.

``request.RunRequest`` is one check's validated texts and per-call options; ``plan`` turns the
options (``RunOptions``, one model; the remote doors' allow-lists, ``DOOR_OPTIONS``) and
the deployment's settings into a ``Plan`` (its mode among them); ``context`` carries the
deadline, cancel flag and progress through a check; ``inputs`` validates texts; ``doors``
holds what every front door shares; ``many`` fans many pairs out. A front door calls one
of ``conli.Checker``'s typed entrances with a ``RunRequest``: ``run`` (the plan's own
steps), ``run_check``, ``run_rewrite`` or ``run_judge``.
"""
