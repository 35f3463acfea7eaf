"""Reports on top of the releases: ``userdp demo`` (:mod:`.demo`), maps of heatmaps (:mod:`.maps`) and other
figures (:mod:`.plots`)."""
