// VeilCall: WebRTC peers (webrtcbin), call sessions, statistics.
