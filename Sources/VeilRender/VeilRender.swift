// VeilRender
