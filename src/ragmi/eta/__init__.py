"""The time estimate ``make run`` prints before it starts (``tools/eta.py``), by subject: the machine
(:mod:`.cpu`), the run's work (:mod:`.work`), this machine's speed (:mod:`.speed`), the estimate and its
lines (:mod:`.estimate`), and the failed steps' logs after a failed run (:mod:`.failures`).  Nothing
here starts a job; every function reads the config, the run's folder and ``/proc``."""
