"""Baselines as files: ``kbase export`` / ``import`` (``transfer``), the files' format (``export_files``), reading
and checking an export folder (``export_folder``) and what an export file may hold before anything of it is
decoded (``import_checks``: the data branch is hostile until it checks out)."""
