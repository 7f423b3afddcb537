// Veil's browser client: joins a room over the signaling protocol v1 (docs/protocol.md), and
// talks to every other participant over WebRTC exactly as `veil call` does: Opus voice both ways
// and the "expressions" data channel (unordered, no retransmissions) carrying ExpressionFrames
// (docs/wire-format.md). This page never asks for the camera: its own avatar follows its voice.

import { sessionDescriptionRefusal } from './sdp.js';

const NAME = /^[A-Za-z0-9._\-@+~]{1,64}$/;
const CHANNEL_LABEL = 'expressions';
const FRAMES_PER_SECOND = 30;
const FRAME_MILLIS = 1000 / FRAMES_PER_SECOND;
/** Ping and statistics once a second: every 30th tick of the frame clock. */
const TICKS_PER_SECOND = FRAMES_PER_SECOND;
/** A connected peer silent this long, or failed/disconnected this long, is renegotiated (as `veil call`). */
const SILENCE_MILLIS = 3000;
const DISCONNECTED_MILLIS = 2000;
const RECOVERY_ATTEMPTS = 3;
const MAX_BUFFERED = 4 * 128;
/** Seconds between 1900 (NTP) and 1970 (Unix): Chrome stamps RTCP with NTP wall-clock time. */
const NTP_UNIX_OFFSET_MICROS = 2208988800 * 1e6;

const ERRORS = {
  token_missing: 'No token given. Ask whoever runs the server for a link or a token.',
  token_malformed: 'That token is not a Veil token (it should start with "v1."). Check it was copied completely.',
  token_forged: 'That token was not issued by this server. Ask its operator for a new one.',
  token_expired: 'That token has expired. Ask for a new one.',
  token_wrong_room: 'That token is for another room. Check the room name, or ask for a token for this room.',
  token_wrong_user: 'That token is for another name. Join with the name it was issued for, or ask for a new one.',
  room_full: 'The room is full. Try again later.',
  replaced: 'You joined this room from another tab or device, which took over this call.',
  server_full: 'The server is busy. Try again in a moment.',
  server_shutdown: 'The server is shutting down.',
  rate_limited: 'The server cut the connection: too many messages.',
  ping_timeout: 'The connection to the server went silent.',
  join_timeout: 'Joining took too long.',
  bad_message: 'The server did not understand this page (protocol error). Reload the page.',
  unsupported_version: 'This page speaks a protocol version the server does not. Reload the page.',
  unknown_type: 'The server did not understand this page (protocol error). Reload the page.',
  message_too_large: 'A message was too large for the server.',
  slow_consumer: 'The connection was too slow to keep up.',
  video_not_allowed: 'Veil carries voice and expressions only, never video.',
};

// Filled in by boot(): the wire codec, the avatar, the voice-driven face and the frame clock.
let wire = null, avatar = null, voice = null, clock = null;

/** What tests (and the curious) can read: window.veil. */
const debug = {
  status: 'lobby', error: null, peersCreated: 0, framesSent: 0, certificateMillis: null, joinMillis: null,
  userMediaRequests: [], remotes: {}, candidatesSent: [],
};
window.veil = debug;

/** An element of the page, or of the picture-in-picture window while the avatars are in it. */
const $ = (id) => document.getElementById(id) || state.pip?.window?.document.getElementById(id) || null;
const state = {
  ws: null, room: '', user: '', joined: false, leaving: false, muted: false,
  stream: null, track: null, audioContext: null, frameClock: null, ticks: 0,
  certificate: null, certificatePromise: null, rig: null, renderer: null,
  remotes: new Map(), iceServers: [], sequence: 0, voiceExpression: null, selfExpression: null, pip: null,
  background: null, style: null, sinkId: '', joinStarted: 0,
};

// MARK: - Start-up

boot();

async function boot() {
  prepareCertificate();
  readFragment();
  $('join-form').addEventListener('submit', (event) => { event.preventDefault(); join(); });
  $('leave').addEventListener('click', () => leave());
  $('mute').addEventListener('click', () => setMuted(!state.muted));
  $('pip').addEventListener('click', () => togglePictureInPicture());
  $('pip').hidden = !pictureInPictureKind();
  $('corner').addEventListener('change', (e) => { $('self').dataset.corner = e.target.value; store('corner', e.target.value); });
  $('background').addEventListener('change', (e) => { state.background = e.target.value; store('background', e.target.value); });
  $('output').addEventListener('change', (e) => setOutput(e.target.value));
  // Closing or reloading the tab sends no leave: the server holds the seat for 3 s, so a reload
  // resumes the call, and otherwise the others see the participant time out.
  for (const id of ['room', 'user', 'token']) $(id).addEventListener('input', () => $(id).removeAttribute('aria-invalid'));

  document.addEventListener('visibilitychange', visibilityChanged);
  state.modules = Promise.allSettled([import('./wire.js'), import('./avatar.js'), import('./voice.js'), import('./frame-clock.js')]);
  const [w, a, v, c] = await state.modules;
  if (w.status === 'fulfilled') wire = w.value;
  if (a.status === 'fulfilled') avatar = a.value;
  if (v.status === 'fulfilled') voice = v.value;
  if (c.status === 'fulfilled') clock = c.value;
  if (!wire || !clock) showLobbyMessage(`This page is incomplete (${wire ? 'frame-clock.js' : 'wire.js'} did not load): reload, or tell whoever runs the server.`);
  if (avatar) {
    try {
      state.rig = await avatar.loadRig('avatar-rig.json');
      state.renderer = new avatar.AvatarRenderer(state.rig);
    } catch (error) {
      console.warn('avatar rig', error);
    }
    fillBackgrounds();
  }
  $('corner').value = load('corner') || 'bottom-right';
  $('self').dataset.corner = $('corner').value;
  debug.readyMillis = performance.now();
  debug.ready = true;
}

function namesOf(collection) {
  if (!collection) return [];
  if (Array.isArray(collection)) return collection.map((x) => (typeof x === 'string' ? x : x.name)).filter(Boolean);
  return Object.keys(collection);
}

function fillBackgrounds() {
  const select = $('background');
  const names = namesOf(avatar.BACKGROUNDS);
  state.style = namesOf(avatar.STYLES)[0];
  select.replaceChildren(...names.map((name) => new Option(name, name)));
  const saved = load('background');
  if (saved && names.includes(saved)) select.value = saved;
  state.background = select.value || undefined;
  select.closest('label').hidden = names.length < 2;
}

/** `#room=…&user=…&token=…` fills the form; the fragment then leaves the address bar and history. */
function readFragment() {
  if (location.hash.length < 2) return;
  // Split by hand rather than with URLSearchParams, which reads '+' as a space: names may hold '+'.
  const params = new Map();
  for (const part of location.hash.slice(1).split('&')) {
    const equals = part.indexOf('=');
    if (equals < 0) continue;
    try { params.set(decodeURIComponent(part.slice(0, equals)), decodeURIComponent(part.slice(equals + 1))); } catch { /* malformed */ }
  }
  for (const key of ['room', 'user', 'token']) {
    const value = params.get(key);
    if (value) $(key).value = value;
  }
  history.replaceState(null, '', location.pathname + location.search);
  if (params.get('token')) showLobbyMessage('Ready: press Join when you are.', true);
}

function store(key, value) { try { localStorage.setItem(`veil.${key}`, value); } catch { /* private mode */ } }
function load(key) { try { return localStorage.getItem(`veil.${key}`); } catch { return null; } }

// MARK: - Joining

async function join() {
  const room = $('room').value.trim(), user = $('user').value.trim(), token = $('token').value.trim();
  let bad = null;
  if (!NAME.test(room)) bad = ['room', 'The room name must be 1–64 letters, digits or . _ - @ + ~ (no spaces).'];
  else if (!NAME.test(user)) bad = ['user', 'Your name must be 1–64 letters, digits or . _ - @ + ~ (no spaces).'];
  else if (!token) bad = ['token', 'A token is needed: ask whoever runs the server for one.'];
  if (bad) {
    $(bad[0]).setAttribute('aria-invalid', 'true');
    $(bad[0]).focus();
    return showLobbyMessage(bad[1]);
  }
  if ($('join').disabled) return;
  $('join').disabled = true;
  await state.modules;
  if (!wire || !clock) { $('join').disabled = false; return showLobbyMessage('This page is incomplete (a script did not load): reload it.'); }
  // A new generation: timers of an earlier call (a pending automatic rejoin) no longer act, and the
  // voice-driven face is seeded anew from this name. Frames are numbered from a random start, so
  // that the numbering does not link this call to another one from the same page.
  Object.assign(state, { room, user, leaving: false, joined: false, muted: false,
                         sequence: crypto.getRandomValues(new Uint32Array(1))[0],
                         generation: (state.generation || 0) + 1, voiceExpression: null });
  state.joinStarted = performance.now();
  debug.status = 'joining';
  debug.error = null;
  $('join').disabled = true;
  showLobbyMessage('Connecting…', true);

  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  let ws;
  try {
    ws = new WebSocket(`${scheme}//${location.host}/ws`);
  } catch (error) {
    return failJoin(`Cannot reach the server: ${error.message}`);
  }
  // The audio context is made inside the click, so that the browser lets it play. The microphone
  // is asked for once the server has admitted us: a bad link never triggers a permission prompt.
  state.audioContext = state.audioContext || new AudioContext();
  state.audioContext.resume().catch(() => {});
  state.microphone = null;
  state.ws = ws;
  ws.onopen = () => send({ type: 'join', room, user, token });
  ws.onmessage = (event) => {
    if (state.ws !== ws) return;
    let message;
    try { message = JSON.parse(event.data); } catch { return; }
    received(message);
  };
  ws.onclose = (event) => { if (state.ws === ws) closed(event); };
}

/** Asks for the microphone (audio only, never video). Without one the page still joins: it sends silence. */
async function openMicrophone() {
  const constraints = { audio: true };
  debug.userMediaRequests.push(constraints);
  let stream = null, problem = null;
  try {
    stream = await navigator.mediaDevices.getUserMedia(constraints);
  } catch (error) {
    problem = error.name === 'NotAllowedError'
      ? 'The microphone is blocked, so others will not hear you (allow it in the address bar and rejoin).'
      : `No microphone (${error.name}): others will not hear you.`;
    if (!window.isSecureContext) problem = 'This page is not on HTTPS, so the browser offers no microphone: others will not hear you. (See docs/browser.md.)';
  }
  if (!stream) {
    // A silent track keeps the audio section, and the RTP the others watch for liveness, flowing.
    const destination = state.audioContext.createMediaStreamDestination();
    const silence = state.audioContext.createConstantSource();
    silence.offset.value = 0;
    silence.connect(destination);
    silence.start();
    state.silence = silence;
    stream = destination.stream;
  }
  state.stream = stream;
  state.track = stream.getAudioTracks()[0];
  state.track.enabled = !state.muted;
  state.frameClock?.listen(stream);
  if (problem) showCallMessage(problem);
  return stream;
}

function send(message) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify({ v: 1, ...message }));
}

function received(message) {
  switch (message.type) {
    case 'joined': return joined(message);
    case 'participantJoined':
      remoteFor(message.user).muted = !!message.muted;
      return render();
    case 'participantLeft': return removeRemote(message.user, message.reason);
    case 'offer': return offerReceived(message.from, message.sdp);
    case 'answer': return answerReceived(message.from, message.sdp);
    case 'ice': return iceReceived(message.from, message.mline, message.candidate);
    case 'muteChanged': {
      const remote = state.remotes.get(message.user);
      if (remote) { remote.muted = !!message.muted; render(); }
      return;
    }
    case 'error': return serverError(message.code, message.message);
    case 'pong': return;
    default: return;
  }
}

async function joined(message) {
  state.joined = true;
  state.iceServers = Array.isArray(message.iceServers) ? message.iceServers : [];
  debug.status = 'joined';
  debug.timings = { joined: performance.now() - state.joinStarted };
  $('lobby').hidden = true;
  $('call').hidden = false;
  $('room-name').textContent = message.room;
  $('self-name').textContent = `${message.you} (you)`;
  $('join').disabled = false;
  startTimers();
  if (message.muted) setMuted(true);
  // The room as the server has it now: after a rejoin, whoever left meanwhile is gone. The others'
  // tiles come at once; whoever leaves while the microphone is still being asked for (a
  // permission prompt may take long) is removed by `participantLeft` and gets no offer.
  const participants = (Array.isArray(message.participants) ? message.participants : [])
    .filter((participant) => typeof participant?.user === 'string' && NAME.test(participant.user) && participant.user !== state.user);
  const present = new Set(participants.map((participant) => participant.user));
  for (const user of [...state.remotes.keys()]) if (!present.has(user)) removeRemote(user, 'gone');
  const expected = participants.map((participant) => {
    const remote = remoteFor(participant.user);
    remote.muted = !!participant.muted;
    return remote;
  });
  render();
  if (!state.microphone || !state.stream) state.microphone = openMicrophone();
  await state.microphone;
  await state.certificatePromise;
  debug.timings.microphone = performance.now() - state.joinStarted;
  updateOutputs();
  if (!state.joined) return;
  // The newcomer offers to everyone already there (the mesh rule).
  for (const remote of expected) if (state.remotes.get(remote.user) === remote) createPeer(remote.user, true);
  render();
}

function serverError(code, text) {
  const friendly = ERRORS[code] || `The server said: ${text || code}`;
  debug.error = { code, message: friendly };
  if (!state.joined || code.startsWith('token_') || code === 'room_full') {
    debug.status = 'error';
    state.leaving = true;
    return failJoin(friendly);
  }
  if (code === 'replaced') { state.leaving = true; return endCall(friendly); }
  if (code === 'unknown_peer' || code === 'not_joined' || code === 'already_joined' || code === 'video_not_allowed') {
    return console.warn('signaling', code, text);
  }
  showCallMessage(friendly);
}

function failJoin(text) {
  stopMicrophone();
  closeEverything();
  $('join').disabled = false;
  $('call').hidden = true;
  $('lobby').hidden = false;
  showLobbyMessage(text);
}

function closed(event) {
  const wasJoined = state.joined;
  state.ws = null;
  stopTimers();
  if (state.leaving) return;
  if (!wasJoined) {
    debug.status = 'error';
    return failJoin(debug.error?.message || 'Cannot reach the server. Is it running, and is this the right address?');
  }
  // Dropped while in the call: rejoin after a moment (the server holds the seat for 3 s).
  state.joined = false;
  showCallMessage('Connection to the server lost; reconnecting…');
  const generation = state.generation;
  setTimeout(() => { if (!state.leaving && state.generation === generation) rejoin(); }, 500);
}

function rejoin() {
  const generation = state.generation;
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${scheme}//${location.host}/ws`);
  state.ws = ws;
  ws.onopen = () => send({ type: 'join', room: state.room, user: state.user, token: $('token').value.trim() });
  ws.onmessage = (event) => { if (state.ws === ws) { try { received(JSON.parse(event.data)); } catch { /* ignore */ } } };
  ws.onclose = () => {
    if (state.ws !== ws) return;
    state.ws = null;
    stopTimers();
    if (!state.leaving) setTimeout(() => { if (!state.leaving && state.generation === generation) rejoin(); }, 2000);
  };
  const hide = () => { $('call-message').hidden = true; };
  ws.addEventListener('message', hide, { once: true });
}

function sendLeave() {
  send({ type: 'leave' });
}

/** Leave: tells the server, closes every connection, back to the lobby. */
function leave() {
  state.leaving = true;
  state.generation = (state.generation || 0) + 1;
  sendLeave();
  const ws = state.ws;
  state.ws = null;
  setTimeout(() => ws?.close(1000), 100);
  endCall('You left the call.', true);
}

function endCall(text, info = false) {
  debug.status = 'left';
  closePictureInPicture();
  stopMicrophone();
  closeEverything();
  $('call').hidden = true;
  $('lobby').hidden = false;
  showLobbyMessage(text, info);
}

function closeEverything() {
  stopTimers();
  for (const user of [...state.remotes.keys()]) removeRemote(user, null);
  state.joined = false;
}

function stopMicrophone() {
  state.stream?.getTracks().forEach((t) => t.stop());
  state.frameClock?.listen(null);
  // The stand-in for a missing microphone would otherwise run in the audio context for good.
  try { state.silence?.stop(); state.silence?.disconnect(); } catch { /* stopped */ }
  state.silence = null;
  state.stream = null; state.track = null; state.microphone = null;
}

function showLobbyMessage(text, info = false) {
  const box = $('message');
  box.textContent = text;
  box.classList.toggle('info', info);
  box.hidden = false;
  debug.message = text;
}

function showCallMessage(text) {
  const box = $('call-message');
  box.textContent = text;
  box.hidden = false;
  debug.callMessage = text;
  clearTimeout(showCallMessage.timer);
  showCallMessage.timer = setTimeout(() => { box.hidden = true; }, 8000);
}

// MARK: - The frame clock: own expressions, ping, statistics; and drawing

/**
 * Everything the page does on a schedule runs on the frame clock (frame-clock.js), which ticks
 * 30 times a second from the audio thread (or a worker) and so keeps going in a background tab,
 * where the page's own timers would be throttled to about once a second: the own expression
 * every tick, the server ping and the statistics every 30th. Drawing follows the screen
 * (requestAnimationFrame), which stops while the page is hidden and resumes with the current
 * expression when it shows again.
 */
function startTimers() {
  stopTimers();
  state.frameClock = new clock.FrameClock({ audioContext: state.audioContext, framesPerSecond: FRAMES_PER_SECOND, onTick: tick });
  state.frameClock.start();
  if (state.stream) state.frameClock.listen(state.stream);
  debug.clock = state.frameClock.ticks;
  if (!state.drawing) { state.drawing = true; requestAnimationFrame(draw); }
}

function stopTimers() {
  state.frameClock?.stop();
  state.frameClock = null;
}

function tick({ level, captureMillis, source }) {
  debug.clockSource = source;
  sendExpression(level, captureMillis);
  // A hidden page gets no animation frames; the picture-in-picture window still shows the call.
  if (state.pip && document.hidden) drawFrame();
  state.ticks++;
  if (state.ticks % TICKS_PER_SECOND === 0) {
    send({ type: 'ping', t: Date.now() });
    collectStatistics();
  }
}

/**
 * One tick's own voice-driven expression, captured at `captureMillis` (performance.now() clock)
 * with the microphone at `level` (RMS): drawn in the inset and sent to everyone. Muted, the mouth
 * is closed from the first tick after the mute.
 */
function sendExpression(level, captureMillis) {
  let expression = wire.neutralExpression();
  if (voice) {
    state.voiceExpression = state.voiceExpression || new voice.VoiceExpression({ seed: seedOf(state.user) });
    try {
      expression = state.voiceExpression.update(state.muted ? 0 : Math.min(1, level), captureMillis / 1000, state.muted) || expression;
    } catch (e) { console.warn(e); }
  }
  state.selfExpression = expression;
  // Stamped on the clock Chrome's RTCP sender reports use (NTP wall clock), so that receivers can
  // align the expression with the voice captured at the same moment. A page cannot move Chrome's
  // RTCP clock to a random origin as `veil call` does, so the frames reveal no more than those
  // reports already do: the machine's wall clock, not its uptime (docs/privacy.md).
  const captureTimeMicros = Math.round((performance.timeOrigin + captureMillis) * 1000 + NTP_UNIX_OFFSET_MICROS);
  let bytes;
  try {
    bytes = wire.encodeFrame({ sequence: state.sequence >>> 0, captureTimeMicros, state: 'tracked', isVoiceDriven: true, expression });
  } catch (e) { return console.warn('encode', e); }
  state.sequence = (state.sequence + 1) >>> 0;
  for (const remote of state.remotes.values()) {
    const channel = remote.channel;
    if (channel && channel.readyState === 'open' && channel.bufferedAmount + bytes.length <= MAX_BUFFERED) {
      channel.send(bytes);
      remote.debug.framesSent++;
      debug.framesSent++;
    }
  }
}

function seedOf(text) {
  let h = 2166136261;
  for (const c of text) h = Math.imul(h ^ c.codePointAt(0), 16777619) >>> 0;
  return h;
}

// MARK: - Remote participants and their peer connections

function remoteFor(user) {
  let remote = state.remotes.get(user);
  if (!remote) {
    remote = {
      user, muted: false, pc: null, channel: null, offerer: false, pendingIce: [], frames: [], tile: null,
      audio: null, analyser: null, lastHeard: 0, badSince: 0, attempts: 0, recovering: false,
      offset: null, playout: null, quality: 'down', lastPackets: null,
      debug: { framesDecoded: 0, framesInvalid: 0, voiceDriven: 0, framesSent: 0, state: 'new', audioLevel: 0, lastExpression: null },
    };
    debug.remotes[user] = remote.debug;
    state.remotes.set(user, remote);
    addTile(remote);
  }
  return remote;
}

function removeRemote(user, reason) {
  const remote = state.remotes.get(user);
  if (!remote) return;
  closePeer(remote);
  remote.tile?.remove();
  remote.audio?.remove();
  state.remotes.delete(user);
  if (debug.remotes[user]) debug.remotes[user].left = reason;
  render();
}

function closePeer(remote) {
  try { remote.channel?.close(); } catch { /* closed */ }
  try { remote.pc?.close(); } catch { /* closed */ }
  remote.pc = null; remote.channel = null; remote.pendingIce = [];
}

/**
 * Makes the DTLS certificate the next connection will use, ahead of time so that connecting does
 * not wait for it. Each connection gets its own: a certificate shared by two connections would
 * show the same fingerprint to peers in different rooms, and link them.
 */
function prepareCertificate() {
  const start = performance.now();
  state.certificate = null;
  state.certificatePromise = RTCPeerConnection.generateCertificate({ name: 'ECDSA', namedCurve: 'P-256' })
    .then((cert) => { state.certificate = cert; debug.certificateMillis = performance.now() - start; return cert; })
    .catch(() => null);
}

function createPeer(user, offerer) {
  const remote = remoteFor(user);
  closePeer(remote);
  const config = { iceServers: state.iceServers, bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require' };
  // Without a prepared one (two connections in quick succession), the browser makes its own.
  if (state.certificate) config.certificates = [state.certificate];
  prepareCertificate();
  const pc = new RTCPeerConnection(config);
  debug.peersCreated++;
  remote.pc = pc;
  remote.offerer = offerer;
  remote.lastHeard = performance.now();
  remote.badSince = 0;
  remote.frames = [];
  remote.offset = null;
  remote.lastPackets = null;
  const transceiver = pc.addTransceiver(state.track, { direction: 'sendrecv', streams: [state.stream] });
  preferOpus(transceiver);
  pc.onicecandidate = (event) => {
    if (remote.pc !== pc) return;
    const c = event.candidate;
    // Candidates go to the other side as they are found; Veil bundles everything on m-line 0.
    if (c && c.candidate) debug.candidatesSent.push(c.candidate);
    if (c && c.candidate) send({ type: 'ice', to: user, mline: c.sdpMLineIndex ?? 0, candidate: c.candidate });
  };
  pc.onconnectionstatechange = () => {
    if (remote.pc !== pc) return;
    remote.debug.state = pc.connectionState;
    if (pc.connectionState === 'connected') {
      if (debug.firstConnectedMillis == null) debug.firstConnectedMillis = performance.now() - state.joinStarted;
      if (debug.timings && debug.timings.connected == null) debug.timings.connected = debug.firstConnectedMillis;
      remote.attempts = 0;
    }
    render();
  };
  pc.ontrack = (event) => attachAudio(remote, event.streams[0] || new MediaStream([event.track]));
  pc.ondatachannel = (event) => {
    // Only the agreed channel carries anything; another label is closed.
    if (remote.pc !== pc) return;
    if (event.channel.label !== CHANNEL_LABEL || offerer) { event.channel.close(); return; }
    // One channel per connection: while the first is up, another one is closed.
    const current = remote.channel;
    if (current && current !== event.channel && (current.readyState === 'open' || current.readyState === 'connecting')) {
      event.channel.close();
      return;
    }
    useChannel(remote, event.channel);
  };
  if (offerer) {
    useChannel(remote, pc.createDataChannel(CHANNEL_LABEL, { ordered: false, maxRetransmits: 0 }));
    makeOffer(remote, pc);
  }
  return remote;
}

/** Offers Opus only: the one codec every Veil participant sends and expects. */
function preferOpus(transceiver) {
  const capabilities = RTCRtpReceiver.getCapabilities?.('audio');
  if (!capabilities || !transceiver.setCodecPreferences) return;
  const opus = capabilities.codecs.filter((c) => c.mimeType.toLowerCase() === 'audio/opus');
  if (opus.length) { try { transceiver.setCodecPreferences(opus); } catch { /* keep defaults */ } }
}

/**
 * The offer with Opus on RTP payload type 96, the one `veil call` sends it on. webrtcbin (GStreamer
 * 1.22) answers an offer with its own audio transceiver only when the payload types agree;
 * otherwise it answers `recvonly` and the browser would hear nothing. Returned unchanged when 96
 * is taken or Opus is missing.
 */
function opusAsNativePeersSendIt(sdp) {
  const match = /^a=rtpmap:(\d+) opus\/48000/im.exec(sdp);
  const from = match?.[1];
  if (!from || from === '96' || /^a=rtpmap:96 /m.test(sdp)) return sdp;
  return sdp.split('\r\n').map((line) => {
    if (line.startsWith('m=audio ')) return line.split(' ').map((f, i) => (i >= 3 && f === from ? '96' : f)).join(' ');
    return line.replace(new RegExp(`^a=(rtpmap|fmtp|rtcp-fb):${from} `), 'a=$1:96 ');
  }).join('\r\n');
}

async function makeOffer(remote, pc) {
  try {
    const offer = await pc.createOffer();
    await pc.setLocalDescription({ type: 'offer', sdp: opusAsNativePeersSendIt(offer.sdp) });
    if (remote.pc === pc) send({ type: 'offer', to: remote.user, sdp: pc.localDescription.sdp });
    if (debug.timings && debug.timings.offer == null) debug.timings.offer = performance.now() - state.joinStarted;
  } catch (error) {
    showCallMessage(`Could not start a connection to ${remote.user}: ${error.message}`);
  }
}

async function offerReceived(from, sdp) {
  if (!state.joined || !NAME.test(from)) return;
  const existing = state.remotes.get(from);
  // Crossing offers: the side whose name sorts first keeps its own and ignores the other's.
  if (existing?.pc && existing.offerer && existing.pc.signalingState === 'have-local-offer' && state.user < from) return;
  await state.microphone;
  await state.certificatePromise;
  const refusal = sessionDescriptionRefusal(sdp);
  if (refusal) { showCallMessage(`Refused ${from}'s offer: ${refusal}. Veil carries voice and expressions only.`); return; }
  const remote = createPeer(from, false);
  const pc = remote.pc;
  try {
    await pc.setRemoteDescription({ type: 'offer', sdp });
    remote.debug.remoteSdp = sdp;
    await flushIce(remote, pc);
    const answer = await pc.createAnswer();
    await pc.setLocalDescription(answer);
    if (remote.pc === pc) send({ type: 'answer', to: from, sdp: pc.localDescription.sdp });
  } catch (error) {
    showCallMessage(`Could not answer ${from}: ${error.message}`);
  }
}

async function answerReceived(from, sdp) {
  const remote = state.remotes.get(from);
  const pc = remote?.pc;
  if (!pc || pc.signalingState !== 'have-local-offer') return;
  const refusal = sessionDescriptionRefusal(sdp);
  if (refusal) { showCallMessage(`Refused ${from}'s answer: ${refusal}. Veil carries voice and expressions only.`); return; }
  try {
    await pc.setRemoteDescription({ type: 'answer', sdp });
    remote.debug.remoteSdp = sdp;
    await flushIce(remote, pc);
  } catch (error) {
    showCallMessage(`Could not connect to ${from}: ${error.message}`);
  }
}

async function iceReceived(from, mline, candidate) {
  const remote = state.remotes.get(from);
  if (!remote?.pc || typeof candidate !== 'string' || candidate === '') return;
  const init = { candidate: candidate.replace(/^a=/, ''), sdpMLineIndex: Number.isInteger(mline) ? mline : 0 };
  if (!remote.pc.remoteDescription) { if (remote.pendingIce.length < 64) remote.pendingIce.push(init); return; }
  try { await remote.pc.addIceCandidate(init); } catch (error) { console.warn('candidate', error.message); }
}

async function flushIce(remote, pc) {
  const pending = remote.pendingIce.splice(0);
  for (const init of pending) {
    try { await pc.addIceCandidate(init); } catch (error) { console.warn('candidate', error.message); }
  }
}

function useChannel(remote, channel) {
  remote.channel = channel;
  channel.binaryType = 'arraybuffer';
  channel.onmessage = (event) => {
    if (remote.channel !== channel) return;
    if (!(event.data instanceof ArrayBuffer) || event.data.byteLength > 128) { remote.debug.framesInvalid++; return; }
    let frame;
    try { frame = wire.decodeFrame(new Uint8Array(event.data)); } catch { remote.debug.framesInvalid++; return; }
    const arrival = performance.now();
    remote.lastHeard = arrival;
    remote.debug.framesDecoded++;
    remote.debug.lastReceivedSequence = frame.sequence;
    if (frame.isVoiceDriven) remote.debug.voiceDriven++;
    remote.frames.push({ frame, arrival });
    if (remote.frames.length > 90) remote.frames.splice(0, remote.frames.length - 90);
    // The lowest arrival-minus-capture difference seen is the fastest path: frames are shown
    // at that offset plus the voice's playout delay, which absorbs network jitter.
    const difference = arrival - frame.captureTimeMicros / 1000;
    if (remote.offset === null || difference < remote.offset) remote.offset = difference;
    else remote.offset += 0.002 * (difference - remote.offset) * (FRAME_MILLIS / 1000);
  };
}

function attachAudio(remote, stream) {
  if (!remote.audio) {
    remote.audio = document.createElement('audio');
    remote.audio.autoplay = true;
    $('audio').append(remote.audio);
  }
  remote.audio.srcObject = stream;
  if (state.sinkId && remote.audio.setSinkId) remote.audio.setSinkId(state.sinkId).catch(() => {});
  remote.audio.play().catch(() => showCallMessage('Click anywhere to hear the others (the browser held the sound back).'));
  try {
    const source = state.audioContext.createMediaStreamSource(stream);
    remote.analyser = state.audioContext.createAnalyser();
    remote.analyser.fftSize = 1024;
    source.connect(remote.analyser);
  } catch { remote.analyser = null; }
}

document.addEventListener('click', () => {
  state.audioContext?.resume().catch(() => {});
  for (const remote of state.remotes.values()) remote.audio?.play().catch(() => {});
});

// MARK: - Statistics, liveness, recovery

async function collectStatistics() {
  const now = performance.now();
  let worst = state.remotes.size ? 0 : 5;
  for (const remote of state.remotes.values()) {
    const pc = remote.pc;
    if (!pc) continue;
    let rtt = null, lost = 0, received = 0, audioBytes = 0, packets = 0, senderReport = null, jitterDelay = null;
    try {
      const report = await pc.getStats();
      report.forEach((s) => {
        if (s.type === 'candidate-pair' && s.nominated && s.state === 'succeeded' && s.currentRoundTripTime != null) rtt = s.currentRoundTripTime * 1000;
        if (s.type === 'inbound-rtp' && s.kind === 'audio') {
          lost = s.packetsLost || 0; received = s.packetsReceived || 0; audioBytes = s.bytesReceived || 0;
          packets = received;
          if (s.jitterBufferEmittedCount) jitterDelay = (s.jitterBufferDelay / s.jitterBufferEmittedCount) * 1000;
        }
        if (s.type === 'remote-outbound-rtp' && s.kind === 'audio' && s.remoteTimestamp) senderReport = { remote: s.remoteTimestamp, local: s.timestamp };
        if (s.type === 'remote-inbound-rtp' && s.kind === 'audio' && rtt === null && s.roundTripTime != null) rtt = s.roundTripTime * 1000;
      });
    } catch { continue; }
    if (remote.pc !== pc) continue;
    const previous = remote.lastPackets;
    let lossFraction = null;
    if (previous) {
      const dr = received - previous.received, dl = lost - previous.lost;
      if (dr + dl > 0) lossFraction = Math.max(0, dl) / (dr + dl);
      if (dr > 0) remote.lastHeard = Math.max(remote.lastHeard, now);
    }
    remote.lastPackets = { received, lost };
    remote.debug.audioPackets = packets;
    remote.debug.audioBytes = audioBytes;
    remote.debug.rttMillis = rtt;
    remote.debug.audioLevel = analyserLevel(remote.analyser);
    remote.playoutDelay = jitterDelay;
    // The sender's latest RTCP sender report maps its media clock, on which it also stamps its
    // frames (`veil call`: the monotonic clock; a browser: NTP wall-clock time), to this page's
    // clock. Chrome reports the NTP time as Unix milliseconds of the era it guesses; the frames
    // need the raw 32-bit NTP seconds (a native clock near zero reads as the 2036 era otherwise).
    if (senderReport) {
      const ntpMillis = (senderReport.remote + NTP_UNIX_OFFSET_MICROS / 1000) % (4294967296 * 1000);
      remote.playout = { senderMillis: ntpMillis, localMillis: senderReport.local - performance.timeOrigin };
    } else {
      remote.playout = null;
    }
    const connected = pc.connectionState === 'connected';
    remote.quality = assessQuality(rtt, lossFraction, connected);
    worst = Math.max(worst, QUALITY.indexOf(remote.quality));
    checkPeer(remote, now);
  }
  const level = QUALITY[Math.min(worst, 5)];
  $('quality').dataset.level = level;
  $('quality-text').textContent = state.remotes.size ? level.replace('veryBad', 'very bad') : 'alone';
  debug.quality = level;
  render();
}

const QUALITY = ['excellent', 'good', 'poor', 'bad', 'veryBad', 'down'];
/** NetworkQuality.assess, as in VeilCall: the worse of the RTT and loss levels. */
function assessQuality(rttMillis, lossFraction, connected) {
  if (!connected) return 'down';
  if (lossFraction !== null && lossFraction >= 1) return 'down';
  const level = (value, limits) => {
    if (value === null || Number.isNaN(value)) return 0;
    const i = limits.findIndex((limit) => Math.max(value, 0) <= limit);
    return i < 0 ? limits.length : i;
  };
  return QUALITY[Math.max(level(rttMillis, [100, 200, 300, 500]), level(lossFraction, [0.01, 0.03, 0.08, 0.15]))];
}

/** RMS of `analyser`'s latest samples (0 without one); `buffer` receives them, if given. */
function analyserLevel(analyser, buffer) {
  if (!analyser) return 0;
  buffer = buffer || new Float32Array(analyser.fftSize);
  analyser.getFloatTimeDomainData(buffer);
  let sum = 0;
  for (const x of buffer) sum += x * x;
  return Math.sqrt(sum / buffer.length);
}

/** Like `veil call`: a peer failed, disconnected for 2 s or silent for 3 s gets a fresh offer (3 tries). */
function checkPeer(remote, now) {
  const pc = remote.pc;
  const s = pc.connectionState;
  const silent = s === 'connected' && now - remote.lastHeard > SILENCE_MILLIS;
  if (s === 'disconnected') remote.badSince = remote.badSince || now; else if (s !== 'failed') remote.badSince = 0;
  const broken = s === 'failed' || silent || (s === 'disconnected' && now - remote.badSince > DISCONNECTED_MILLIS);
  if (!broken || remote.attempts >= RECOVERY_ATTEMPTS) return;
  remote.attempts++;
  remote.debug.recoveries = remote.attempts;
  createPeer(remote.user, true);
}

// MARK: - Drawing

function addTile(remote) {
  const figure = document.createElement('figure');
  figure.className = 'tile';
  figure.dataset.user = remote.user;
  const canvas = document.createElement('canvas');
  canvas.setAttribute('aria-label', `${remote.user}'s avatar`);
  const caption = document.createElement('figcaption');
  const name = document.createElement('span');
  name.textContent = remote.user;
  const muted = document.createElement('span');
  muted.className = 'muted-badge';
  muted.textContent = 'muted';
  muted.hidden = true;
  const status = document.createElement('span');
  status.className = 'state';
  caption.append(name, muted, status);
  figure.append(canvas, caption);
  $('grid').append(figure);
  remote.tile = figure;
  remote.canvas = canvas;
  remote.mutedBadge = muted;
  remote.status = status;
}

function render() {
  $('grid').dataset.count = String(state.remotes.size);
  $('alone').hidden = state.remotes.size > 0;
  for (const remote of state.remotes.values()) {
    if (!remote.tile) continue;
    remote.mutedBadge.hidden = !remote.muted;
    const s = remote.pc?.connectionState;
    remote.status.textContent = s === 'connected' ? '' : s === 'failed' ? 'no connection' : 'connecting…';
  }
  $('self-muted').hidden = !state.muted;
}

/** The expression to show for `remote` now: behind the newest frame by the voice's playout delay. */
function expressionFor(remote, now) {
  const frames = remote.frames;
  if (!frames.length) return null;
  let target = null;
  const playout = remote.playout;
  let voiceAligned = false;
  if (playout) {
    // The sender time of the audio playing now: the report's sender time, plus the time since it
    // arrived, minus what the audio spends in the jitter buffer and the output (the one-way
    // delay cancels out). Used when the frames are on the same clock (within 5 s of it).
    const senderMillis = playout.senderMillis + (now - playout.localMillis) - (remote.playoutDelay ?? 40) - 10;
    const newest = unwrapMillis(frames[frames.length - 1].frame.captureTimeMicros / 1000, senderMillis);
    if (Math.abs(newest - senderMillis) < 5000) { target = senderMillis; voiceAligned = true; remote.debug.alignment = 'voice'; }
  }
  if (target === null && remote.offset !== null) {
    const delay = Math.min(Math.max(remote.playoutDelay ?? 60, 20), 400);
    target = now - remote.offset - delay;
    remote.debug.alignment = 'arrival';
  }
  const captureOf = (entry) => (voiceAligned ? unwrapMillis(entry.frame.captureTimeMicros / 1000, target) : entry.frame.captureTimeMicros / 1000);
  let chosen = frames[0];
  for (const entry of frames) {
    if (target !== null && captureOf(entry) > target) break;
    chosen = entry;
  }
  if (target !== null) remote.debug.playoutLagMillis = target - captureOf(chosen);
  remote.debug.lastSequence = chosen.frame.sequence;
  if (chosen.frame.state !== 'tracked') return null;
  return chosen.frame.expression;
}

/** Capture times travel modulo 2^48 µs: the value nearest `reference` (ms) with the same low bits. */
function unwrapMillis(millis, reference) {
  const period = 2 ** 48 / 1000;
  return millis + Math.round((reference - millis) / period) * period;
}

function fitCanvas(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const width = Math.max(1, Math.round(canvas.clientWidth * ratio)), height = Math.max(1, Math.round(canvas.clientHeight * ratio));
  if (canvas.width !== width || canvas.height !== height) { canvas.width = width; canvas.height = height; }
  return { x: 0, y: 0, width, height };
}

function drawAvatar(canvas, expression) {
  const ctx = canvas.getContext('2d');
  const rect = fitCanvas(canvas);
  if (state.renderer && wire) {
    try {
      ctx.clearRect(0, 0, rect.width, rect.height);
      state.renderer.draw(ctx, expression || wire.neutralExpression(), rect, { style: state.style, background: state.background });
      return;
    } catch (error) {
      if (!drawAvatar.warned) { console.warn('avatar', error); drawAvatar.warned = true; }
    }
  }
  ctx.fillStyle = '#0d0f12';
  ctx.fillRect(0, 0, rect.width, rect.height);
}

function draw() {
  if (!state.joined && debug.status !== 'joining') { state.drawing = false; return; }
  drawFrame();
  requestAnimationFrame(draw);
}

/** Every avatar as it is now. */
function drawFrame() {
  const now = performance.now();
  for (const remote of state.remotes.values()) {
    if (!remote.canvas) continue;
    const expression = expressionFor(remote, now);
    remote.debug.lastExpression = expression;
    remote.debug.drawnSequence = remote.debug.lastSequence;
    drawAvatar(remote.canvas, expression);
  }
  if ($('self').dataset.corner !== 'hidden') drawAvatar($('self-canvas'), state.selfExpression);
  if (state.pip?.kind === 'video') composePictureInPicture();
  debug.framesDrawn = (debug.framesDrawn || 0) + 1;
}

/** A page shown again draws the current expressions at once, not at the next animation frame. */
function visibilityChanged() {
  debug.visibility = document.visibilityState;
  if (document.visibilityState !== 'visible' || !state.drawing) return;
  drawFrame();
  // What was drawn, against the newest frame received: for tests and the curious.
  debug.drawnOnShow = { at: performance.now(), remotes: Object.fromEntries([...state.remotes.values()]
    .map((r) => [r.user, { drawn: r.debug.drawnSequence, newest: r.debug.lastReceivedSequence }])) };
}

// MARK: - Controls

function setMuted(muted) {
  state.muted = muted;
  // A disabled track still sends (silent) RTP: the others keep hearing that the connection lives.
  if (state.track) state.track.enabled = !muted;
  $('mute').setAttribute('aria-pressed', String(muted));
  $('mute').textContent = muted ? 'Unmute' : 'Mute';
  send({ type: 'mute', muted });
  render();
}

async function updateOutputs() {
  const control = $('output-control');
  if (!('setSinkId' in HTMLMediaElement.prototype) || !navigator.mediaDevices?.enumerateDevices) { control.hidden = true; return; }
  let outputs = [];
  try { outputs = (await navigator.mediaDevices.enumerateDevices()).filter((d) => d.kind === 'audiooutput'); } catch { /* none */ }
  if (outputs.length < 2) { control.hidden = true; return; }
  $('output').replaceChildren(...outputs.map((d, i) => new Option(d.label || `Output ${i + 1}`, d.deviceId)));
  $('output').value = state.sinkId || 'default';
  control.hidden = false;
}

async function setOutput(deviceId) {
  state.sinkId = deviceId;
  for (const remote of state.remotes.values()) {
    try { await remote.audio?.setSinkId(deviceId); } catch (error) { showCallMessage(`Cannot play on that output: ${error.message}`); }
  }
}

// MARK: - Picture-in-picture

/**
 * Which floating window this browser can keep on top of other tabs and apps: 'document' (Document
 * Picture-in-Picture: the call's own avatar tiles, names and mute badges move into it), 'video' (a
 * <video> of the avatars drawn onto one canvas), or null.
 */
function pictureInPictureKind() {
  if ('documentPictureInPicture' in window) return 'document';
  if (document.pictureInPictureEnabled && HTMLCanvasElement.prototype.captureStream) return 'video';
  return null;
}

async function togglePictureInPicture() {
  if (state.pip) return closePictureInPicture();
  if (!state.joined) return;
  try {
    if (pictureInPictureKind() === 'document') await openDocumentPictureInPicture();
    else if (pictureInPictureKind() === 'video') await openVideoPictureInPicture();
  } catch (error) {
    state.pip = null;
    showCallMessage(`The floating window did not open: ${error.message}`);
  }
  debug.pip = state.pip?.kind || null;
  $('pip').setAttribute('aria-pressed', String(!!state.pip));
  $('pip').textContent = state.pip ? 'Back to the tab' : 'Pop out';
}

/** The avatars (others' tiles and the own inset) move into a floating window; they come back when it closes. */
async function openDocumentPictureInPicture() {
  const pip = await window.documentPictureInPicture.requestWindow({ width: 400, height: 300 });
  const style = pip.document.createElement('link');
  style.rel = 'stylesheet';
  style.href = new URL('veil.css', location.href).href;
  pip.document.head.append(style);
  pip.document.title = `Veil · ${state.room}`;
  pip.document.body.className = 'pip';
  const moved = [$('grid'), $('self')].map((element) => {
    const placeholder = document.createComment(element.id);
    element.replaceWith(placeholder);
    pip.document.body.append(element);
    return { element, placeholder };
  });
  state.pip = { kind: 'document', window: pip, moved };
  pip.addEventListener('pagehide', () => { if (state.pip?.window === pip) returnFromPictureInPicture(); });
  drawFrame();
}

/** The avatars drawn onto one canvas, whose stream a <video> shows in the browser's video window. */
async function openVideoPictureInPicture() {
  const canvas = document.createElement('canvas');
  canvas.width = 480; canvas.height = 360;
  const video = $('pip-video');
  state.pip = { kind: 'video', canvas, video };
  composePictureInPicture();
  video.srcObject = canvas.captureStream(FRAMES_PER_SECOND);
  await video.play();
  await video.requestPictureInPicture();
  video.addEventListener('leavepictureinpicture', () => { if (state.pip?.video === video) returnFromPictureInPicture(); }, { once: true });
}

/** The video window's picture: each other participant's avatar in a grid, with name and mute state. */
function composePictureInPicture() {
  const { canvas } = state.pip;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#0d0f12';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  const remotes = [...state.remotes.values()].filter((r) => r.canvas);
  const columns = Math.ceil(Math.sqrt(Math.max(remotes.length, 1))), rows = Math.ceil(Math.max(remotes.length, 1) / columns);
  const w = canvas.width / columns, h = canvas.height / rows;
  remotes.forEach((remote, i) => {
    const x = (i % columns) * w, y = Math.floor(i / columns) * h;
    if (remote.canvas.width && remote.canvas.height) ctx.drawImage(remote.canvas, x, y, w, h);
    const label = remote.muted ? `${remote.user} · muted` : remote.user;
    ctx.font = '14px system-ui, sans-serif';
    ctx.fillStyle = 'rgba(0, 0, 0, .55)';
    ctx.fillRect(x + 6, y + h - 26, ctx.measureText(label).width + 12, 20);
    ctx.fillStyle = remote.muted ? '#f85149' : '#e6edf3';
    ctx.fillText(label, x + 12, y + h - 11);
  });
  if (!remotes.length) {
    ctx.fillStyle = '#8b949e';
    ctx.font = '16px system-ui, sans-serif';
    ctx.fillText('Waiting for others…', 20, canvas.height / 2);
  }
}

function closePictureInPicture() {
  const pip = state.pip;
  if (!pip) return;
  returnFromPictureInPicture();
  if (pip.kind === 'document') pip.window.close();
  if (pip.kind === 'video' && document.pictureInPictureElement) document.exitPictureInPicture().catch(() => {});
}

/** The floating window closed (by the user or the page): everything is back in the tab. */
function returnFromPictureInPicture() {
  const pip = state.pip;
  if (!pip) return;
  state.pip = null;
  if (pip.kind === 'document') for (const { element, placeholder } of pip.moved) placeholder.replaceWith(element);
  if (pip.kind === 'video') { pip.video.srcObject = null; }
  debug.pip = null;
  const button = $('pip');
  button.setAttribute('aria-pressed', 'false');
  button.textContent = 'Pop out';
  if (state.drawing) drawFrame();
}

navigator.mediaDevices?.addEventListener?.('devicechange', () => { if (state.joined) updateOutputs(); });
