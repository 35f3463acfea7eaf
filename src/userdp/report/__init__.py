"""Reports on top of the releases: ``userdp demo`` (:mod:`.demo`) and figures (:mod:`.plots`)."""
