// The ExpressionFrame wire format, version 1, in the browser: the same bytes as
// Sources/VeilCore/ExpressionFrame+Codec.swift. docs/wire-format.md describes every byte; the golden
// vectors at its end are checked against this module too (Tests/VeilRenderTests/BrowserWireTests.swift).

/** The 52 ARKit blendshape names in Veil's `BlendShape` raw order (the order on the wire). */
export const BLEND_SHAPES = Object.freeze([
  'eyeBlinkLeft', 'eyeLookDownLeft', 'eyeLookInLeft', 'eyeLookOutLeft', 'eyeLookUpLeft', 'eyeSquintLeft', 'eyeWideLeft',
  'eyeBlinkRight', 'eyeLookDownRight', 'eyeLookInRight', 'eyeLookOutRight', 'eyeLookUpRight', 'eyeSquintRight', 'eyeWideRight',
  'jawForward', 'jawLeft', 'jawRight', 'jawOpen',
  'mouthClose', 'mouthFunnel', 'mouthPucker', 'mouthLeft', 'mouthRight',
  'mouthSmileLeft', 'mouthSmileRight', 'mouthFrownLeft', 'mouthFrownRight',
  'mouthDimpleLeft', 'mouthDimpleRight', 'mouthStretchLeft', 'mouthStretchRight',
  'mouthRollLower', 'mouthRollUpper', 'mouthShrugLower', 'mouthShrugUpper',
  'mouthPressLeft', 'mouthPressRight', 'mouthLowerDownLeft', 'mouthLowerDownRight', 'mouthUpperUpLeft', 'mouthUpperUpRight',
  'browDownLeft', 'browDownRight', 'browInnerUp', 'browOuterUpLeft', 'browOuterUpRight',
  'cheekPuff', 'cheekSquintLeft', 'cheekSquintRight',
  'noseSneerLeft', 'noseSneerRight',
  'tongueOut',
]);

/** The format version this module writes and reads (the first byte of every frame). */
export const WIRE_FORMAT_VERSION = 1;
/** No frame is longer; longer input is rejected unread. */
export const MAXIMUM_ENCODED_SIZE = 128;

const TRACKED = 0x01, GAZE = 0x02, VOICE = 0x04, RESERVED_FLAGS = 0xF8;
const COUNT = 52, HEADER = 12, BITMAP = 7, POSE = 6, GAZE_SIZE = 2, CRC_SIZE = 2;
const LOST_SIZE = HEADER + CRC_SIZE;
const RESERVED_BITMAP = 0xF0;
const ANGLE_LIMIT = 18000, GAZE_LIMIT = 127;
const TIME_MODULUS = 2 ** 48;

/**
 * Why bytes are not a valid version-1 frame. `reason` is one of the codes of docs/wire-format.md:
 * truncated, oversized, unsupportedVersion, checksumMismatch, reservedBitsSet, valueOutOfRange,
 * trailingBytes, lostFrameHasPayload. `byteOffset`, `field` (valueOutOfRange) and `version`
 * (unsupportedVersion) say where and what, as in Swift's ExpressionFrameDecodingError.
 */
export class WireError extends Error {
  constructor(reason, byteOffset, message, { field = null, version = null } = {}) {
    super(`invalid expression frame: ${message}`);
    this.name = 'WireError';
    this.reason = reason;
    this.byteOffset = byteOffset;
    this.field = field;
    this.version = version;
  }
}

/** A resting face looking ahead: all coefficients 0, frontal pose, no gaze. */
export function neutralExpression() {
  return { coefficients: new Float32Array(COUNT), headPose: { yaw: 0, pitch: 0, roll: 0 }, gaze: null };
}

/** CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no final XOR) of `bytes[0..<end]`. */
export function crc16(bytes, end = bytes.length) {
  let crc = 0xFFFF;
  for (let i = 0; i < end; i++) {
    crc ^= bytes[i] << 8;
    for (let k = 0; k < 8; k++) crc = (crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1) & 0xFFFF;
  }
  return crc;
}

// Quantisation in single precision, rounding ties away from zero, exactly as Swift's Float.rounded().
const f32 = Math.fround;
function roundAway(x) { return x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5); }
function clamp(v, lo, hi) { return Math.min(Math.max(v, lo), hi); }

function quantizedCoefficient(value) {
  const v = Number(value);
  if (Number.isNaN(v)) return 0;
  return roundAway(f32(f32(clamp(v, 0, 1)) * 255));
}

function quantizedAngle(degrees) {
  const v = Number(degrees);
  if (Number.isNaN(v)) return 0;
  return roundAway(f32(f32(clamp(v, -180, 180)) * 100));
}

function quantizedGaze(gaze) {
  if (gaze == null) return null;
  const x = Number(gaze.x), y = Number(gaze.y);
  if (Number.isNaN(x) || Number.isNaN(y)) return null;
  const axis = (v) => roundAway(f32(f32(clamp(v, -1, 1)) * GAZE_LIMIT));
  return [axis(x), axis(y)];
}

function pushLittleEndian(out, value, byteCount) {
  // value < 2^53: split with arithmetic, not 32-bit shifts.
  let v = value;
  for (let i = 0; i < byteCount; i++) { out.push(v % 256); v = Math.floor(v / 256); }
}

function readLittleEndian(bytes, offset, byteCount) {
  let v = 0;
  for (let i = byteCount - 1; i >= 0; i--) v = v * 256 + bytes[offset + i];
  return v;
}

/**
 * The frame's bytes (a Uint8Array of at most 128). `frame`: { sequence, captureTimeMicros,
 * state: 'tracked' | 'lost', isVoiceDriven, expression: { coefficients, headPose, gaze } }.
 * Never throws on values: like the Swift encoder it repairs them (NaN → 0, clamping, a gaze with a
 * NaN axis is sent as no gaze; sequence wraps at 2^32, capture time at 2^48).
 */
export function encodeFrame(frame) {
  const out = [];
  const tracked = frame.state === 'tracked';
  const expression = frame.expression ?? neutralExpression();
  const gaze = tracked ? quantizedGaze(expression.gaze) : null;
  let flags = 0;
  if (tracked) flags |= TRACKED;
  if (gaze) flags |= GAZE;
  if (tracked && frame.isVoiceDriven) flags |= VOICE;

  const sequence = Number.isFinite(Number(frame.sequence)) ? Math.trunc(Number(frame.sequence)) : 0;
  let time = Number.isFinite(Number(frame.captureTimeMicros)) ? Math.trunc(Number(frame.captureTimeMicros)) : 0;
  time = ((time % TIME_MODULUS) + TIME_MODULUS) % TIME_MODULUS;

  out.push(WIRE_FORMAT_VERSION, flags);
  pushLittleEndian(out, sequence >>> 0, 4);
  pushLittleEndian(out, time, 6);

  if (tracked) {
    const values = expression.coefficients ?? [];
    const quantized = [];
    for (let i = 0; i < COUNT; i++) quantized.push(quantizedCoefficient(i < values.length ? values[i] : 0));
    const bitmap = new Array(BITMAP).fill(0);
    quantized.forEach((q, i) => { if (q !== 0) bitmap[i >> 3] |= 1 << (i & 7); });
    out.push(...bitmap);
    for (const q of quantized) if (q !== 0) out.push(q);
    const pose = expression.headPose ?? {};
    for (const angle of [pose.yaw ?? 0, pose.pitch ?? 0, pose.roll ?? 0]) {
      pushLittleEndian(out, quantizedAngle(angle) & 0xFFFF, 2);
    }
    if (gaze) out.push(gaze[0] & 0xFF, gaze[1] & 0xFF);
  }
  pushLittleEndian(out, crc16(out), 2);
  return Uint8Array.from(out);
}

function presentCoefficients(bytes) {
  const present = [];
  for (let i = 0; i < COUNT; i++) if (bytes[HEADER + (i >> 3)] & (1 << (i & 7))) present.push(i);
  return present;
}

function hex16(v) { return '0x' + v.toString(16).toUpperCase().padStart(4, '0'); }

/**
 * Decodes one version-1 frame (Uint8Array, ArrayBuffer or array of bytes), rejecting anything that
 * is not exactly what `encodeFrame` (or Veil's Swift encoder) produces. Checks run in the order of
 * docs/wire-format.md and the first failure is thrown as a `WireError`.
 */
export function decodeFrame(input) {
  let bytes;
  if (input instanceof Uint8Array) bytes = input;
  else if (input instanceof ArrayBuffer) bytes = new Uint8Array(input);
  else if (ArrayBuffer.isView(input)) bytes = new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  else if (Array.isArray(input)) bytes = Uint8Array.from(input);
  else throw new TypeError('decodeFrame needs a Uint8Array, an ArrayBuffer or an array of bytes');
  const count = bytes.length;

  // 1. Size, before reading anything.
  if (count > MAXIMUM_ENCODED_SIZE) {
    throw new WireError('oversized', MAXIMUM_ENCODED_SIZE, `longer than the ${MAXIMUM_ENCODED_SIZE}-byte maximum; not read`);
  }
  // 2. Version.
  if (count === 0) throw new WireError('truncated', LOST_SIZE, `truncated: 0 bytes, but the smallest frame needs ${LOST_SIZE}`);
  if (bytes[0] !== WIRE_FORMAT_VERSION) {
    throw new WireError('unsupportedVersion', 0,
      `format version ${bytes[0]} is not supported (this decoder reads version ${WIRE_FORMAT_VERSION})`, { version: bytes[0] });
  }
  // 3. Length implied by the tracked and gaze flags and the bitmap's population count.
  if (count < LOST_SIZE) {
    throw new WireError('truncated', LOST_SIZE, `truncated: ${count} bytes, but the smallest frame needs ${LOST_SIZE}`);
  }
  const flags = bytes[1];
  const tracked = (flags & TRACKED) !== 0;
  const hasGaze = (flags & GAZE) !== 0;
  let expected;
  if (tracked) {
    const minimum = HEADER + BITMAP + POSE + CRC_SIZE;
    if (count < minimum) {
      throw new WireError('truncated', minimum, `truncated: ${count} bytes, but a tracked frame with no coefficients needs ${minimum}`);
    }
    expected = HEADER + BITMAP + presentCoefficients(bytes).length + POSE + (hasGaze ? GAZE_SIZE : 0) + CRC_SIZE;
    if (count < expected) {
      throw new WireError('truncated', expected,
        `truncated: ${count} bytes, but the tracked frame its flags and presence bitmap describe needs ${expected}`);
    }
    if (count !== expected) throw new WireError('trailingBytes', expected, `${count - expected} bytes after the ${expected}-byte frame`);
  } else {
    expected = LOST_SIZE;
    if (count !== expected) {
      throw new WireError('lostFrameHasPayload', HEADER, `the frame says lost but ${count - LOST_SIZE} bytes follow its header`);
    }
  }
  // 4. Checksum.
  const crcOffset = expected - CRC_SIZE;
  const received = readLittleEndian(bytes, crcOffset, 2);
  const computed = crc16(bytes, crcOffset);
  if (received !== computed) {
    throw new WireError('checksumMismatch', crcOffset,
      `CRC-16 is ${hex16(received)} but the bytes give ${hex16(computed)}; the frame was corrupted`);
  }
  // 5. Reserved bits and a lost frame's flags.
  if (flags & RESERVED_FLAGS) throw new WireError('reservedBitsSet', 1, `reserved bits set in flags (0x${flags.toString(16)})`);
  const sequence = readLittleEndian(bytes, 2, 4);
  const captureTimeMicros = readLittleEndian(bytes, 6, 6);
  if (!tracked) {
    if (flags & (GAZE | VOICE)) {
      throw new WireError('lostFrameHasPayload', 1, 'the frame says lost but its flags claim gaze or a voice-driven expression');
    }
    return { sequence, captureTimeMicros, state: 'lost', isVoiceDriven: false, expression: neutralExpression() };
  }
  const lastBitmapByte = HEADER + BITMAP - 1;
  if (bytes[lastBitmapByte] & RESERVED_BITMAP) {
    throw new WireError('reservedBitsSet', lastBitmapByte, 'reserved bits set in the presence bitmap (bits 52…55)');
  }
  // 6. Values.
  const expression = neutralExpression();
  let offset = HEADER + BITMAP;
  for (const index of presentCoefficients(bytes)) {
    const q = bytes[offset];
    if (q === 0) {
      const field = `coefficient ${BLEND_SHAPES[index]}`;
      throw new WireError('valueOutOfRange', offset, `${field} out of range: 0 is never sent; present coefficients are 1…255`, { field });
    }
    expression.coefficients[index] = q / 255;
    offset += 1;
  }
  const angles = [];
  for (const field of ['yaw', 'pitch', 'roll']) {
    const raw = readLittleEndian(bytes, offset, 2);
    const q = raw >= 0x8000 ? raw - 0x10000 : raw;
    if (q < -ANGLE_LIMIT || q > ANGLE_LIMIT) {
      throw new WireError('valueOutOfRange', offset, `${field} out of range: ${q} × 0.01° is beyond ±180°`, { field });
    }
    angles.push(f32(q / 100));
    offset += 2;
  }
  expression.headPose = { yaw: angles[0], pitch: angles[1], roll: angles[2] };
  if (hasGaze) {
    const axes = [];
    for (const field of ['gazeX', 'gazeY']) {
      const q = bytes[offset] >= 0x80 ? bytes[offset] - 0x100 : bytes[offset];
      if (q < -GAZE_LIMIT) throw new WireError('valueOutOfRange', offset, `${field} out of range: ${q} is beyond -127…127`, { field });
      axes.push(f32(q / GAZE_LIMIT));
      offset += 1;
    }
    expression.gaze = { x: axes[0], y: axes[1] };
  }
  return { sequence, captureTimeMicros, state: 'tracked', isVoiceDriven: (flags & VOICE) !== 0, expression };
}
