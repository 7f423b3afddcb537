// VeilTracking
