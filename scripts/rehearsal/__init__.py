"""Parts of scripts/emulab_rehearsal.py (run that; it puts scripts/ on sys.path)."""
