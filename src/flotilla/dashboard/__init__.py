"""The live web dashboard of the control plane, served by its API server under ``/dashboard/``.

``model`` and ``timeline`` decide what the pages show (pure), ``sessions`` keeps the one-time tokens and
sessions, ``feed`` follows the API server's storage, ``server`` serves the pages, fragments and event stream.
"""
