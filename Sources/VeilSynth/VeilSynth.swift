// VeilSynth
