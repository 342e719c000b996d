"""The Manager: the background worker, its turn journal, ``doctor`` and the demo.

May import every floor below it (``recall``, ``store``, ``extract``, the kernel),
never ``integrations``, ``cli`` or ``ui``.
"""
