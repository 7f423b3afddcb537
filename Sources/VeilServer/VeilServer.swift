// VeilServer: the room server (libsoup HTTP + WebSocket), tokens, rooms.
