// VeilCairo
