// VeilMedia
