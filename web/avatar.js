// The canonical Veil avatar on a Canvas 2D context: the same rig (web/avatar-rig.json, written by
// `veil rig` from the design Sources/VeilRender/AvatarRig+Design.swift) and the same solve and
// drawing as the Swift renderer (Sources/VeilRender/AvatarRig.swift, AvatarRenderer*.swift), so
// the browser draws the same avatar from the same ExpressionFrames. docs/avatar.md describes the
// rig file. Tests/VeilRenderTests/BrowserAvatarTests.swift compares the two renderers' pixels.

import { BLEND_SHAPES } from './wire.js';

/** The rig file format and version this module reads. */
export const RIG_FORMAT = 'veil-avatar-rig';
export const RIG_VERSION = 1;
/** The named styles of the rig (the same names `veil --style` takes). */
export const STYLES = Object.freeze(['mask', 'sketch']);
/** The named backgrounds of the rig (the same names `veil --background` takes). */
export const BACKGROUNDS = Object.freeze(['gradient', 'dark', 'black', 'white', 'none']);

/** Why a rig cannot be used; `reason` is 'unreadable', 'notARig', 'unsupportedVersion' or 'invalid'. */
export class RigError extends Error {
  constructor(reason, message) {
    super(message);
    this.name = 'RigError';
    this.reason = reason;
  }
}

/** Fetches and validates the rig (by default avatar-rig.json beside this module). */
export async function loadRig(url = new URL('avatar-rig.json', import.meta.url).href) {
  let json;
  try {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    json = await response.json();
  } catch (error) {
    throw new RigError('unreadable', `cannot load the avatar rig ${url}: ${error.message}`);
  }
  return parseRig(json);
}

// MARK: colours ("#rrggbb" or "rgba(r,g,b,a)", components kept as 0…1 floats like Swift's Color)

const unit = (v) => (Number.isNaN(v) ? 0 : Math.min(Math.max(v, 0), 1));
function color(r, g, b, a = 1) { return { r: unit(r), g: unit(g), b: unit(b), a: unit(a) }; }
function parseColor(text) {
  if (typeof text !== 'string') return null;
  let m = /^#([0-9a-fA-F]{6})$/.exec(text);
  if (m) {
    const v = parseInt(m[1], 16);
    return color(((v >> 16) & 255) / 255, ((v >> 8) & 255) / 255, (v & 255) / 255, 1);
  }
  m = /^rgba\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*([0-9.eE+-]+)\s*\)$/.exec(text);
  if (!m) return null;
  const [r, g, b, a] = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])];
  if (r > 255 || g > 255 || b > 255 || !(a >= 0 && a <= 1)) return null;
  return color(r / 255, g / 255, b / 255, a);
}
const withAlpha = (c, a) => color(c.r, c.g, c.b, a);
function mixed(c, o, t) {
  const u = unit(t);
  return color(c.r + (o.r - c.r) * u, c.g + (o.g - c.g) * u, c.b + (o.b - c.b) * u, c.a + (o.a - c.a) * u);
}
const css = (c) => `rgba(${c.r * 255},${c.g * 255},${c.b * 255},${c.a})`;
const WHITE = color(1, 1, 1, 1), BLACK = color(0, 0, 0, 1), CLEAR = color(0, 0, 0, 0);

// MARK: the rig

function fail(message) { throw new RigError('invalid', `invalid avatar rig: ${message}`); }
const isFiniteNumber = (v) => typeof v === 'number' && Number.isFinite(v);

function vectors(list, count, what) {
  if (!Array.isArray(list) || list.length !== count) fail(`${what} needs ${count} entries`);
  const out = new Float64Array(3 * count);
  list.forEach((v, i) => {
    if (!Array.isArray(v) || v.length !== 3 || !v.every(isFiniteNumber)) fail(`${what}[${i}] is not three finite numbers`);
    out[3 * i] = v[0]; out[3 * i + 1] = v[1]; out[3 * i + 2] = v[2];
  });
  return out;
}

function parseStyle(name, s) {
  const need = (key) => {
    const c = parseColor(s[key]);
    if (!c) fail(`style ${name} lacks the colour ${key}`);
    return c;
  };
  const optional = (key) => (s[key] == null ? null : need(key));
  if (s.kind === 'sketch') {
    if (!isFiniteNumber(s.lineWidth) || !isFiniteNumber(s.mouthFillOpacity)) fail(`style ${name} lacks a width or opacity`);
    return { kind: 'sketch', lineColor: need('lineColor'), lineWidth: s.lineWidth, mouthFillOpacity: s.mouthFillOpacity };
  }
  if (s.kind === 'mask') {
    const out = { kind: 'mask', hair: optional('hair'), shirt: optional('shirt') };
    for (const key of ['skin', 'skinShade', 'brows', 'eyeWhite', 'iris', 'pupil', 'lashes', 'lips', 'mouthInterior',
      'teeth', 'tongue', 'blush', 'shadow']) out[key] = need(key);
    return out;
  }
  return fail(`style ${name} has the unknown kind ${s.kind}`);
}

function parseBackground(name, b) {
  if (b.kind === 'none') return { kind: 'none' };
  if (b.kind === 'solid') return { kind: 'solid', color: parseColor(b.color) ?? fail(`background ${name} lacks its colour`) };
  if (b.kind === 'gradient') {
    const top = parseColor(b.top), bottom = parseColor(b.bottom);
    if (!top || !bottom) fail(`background ${name} lacks a colour`);
    return { kind: 'gradient', top, bottom };
  }
  return fail(`background ${name} has the unknown kind ${b.kind}`);
}

/** Validates rig JSON (as written by `veil rig`) and prepares it for drawing. */
export function parseRig(json) {
  if (json === null || typeof json !== 'object' || json.format !== RIG_FORMAT) {
    throw new RigError('notARig', `not a Veil avatar rig (format ${json?.format ?? 'missing'})`);
  }
  if (json.version !== RIG_VERSION) {
    throw new RigError('unsupportedVersion',
      `avatar rig version ${json.version} is not supported (this page reads version ${RIG_VERSION})`);
  }
  const L = json.layout;
  if (!L || !Number.isInteger(L.pointCount) || L.pointCount <= 0) fail('missing layout');
  const n = L.pointCount;
  const indexKeys = Object.keys(L);
  for (const key of indexKeys) if (!Number.isInteger(L[key]) || L[key] < 0 || L[key] > n) fail(`layout.${key}`);
  if (L.hairGrid + L.meridians * L.depthSamples !== n || L.headGrid + L.meridians * L.depthSamples !== L.hairGrid) {
    fail('layout does not add up');
  }
  const shapes = BLEND_SHAPES.map((name) => {
    const field = json.blendShapes?.[name];
    if (field == null) return null;
    const { points, offsets } = field;
    if (!Array.isArray(points) || !Array.isArray(offsets) || points.length !== offsets.length) fail(`${name} displacements`);
    if (!points.every((i) => Number.isInteger(i) && i >= 0 && i < n)) fail(`${name} moves a point out of range`);
    return { points: Int32Array.from(points), offsets: vectors(offsets, offsets.length, name) };
  });
  for (const name of Object.keys(json.blendShapes ?? {})) if (!BLEND_SHAPES.includes(name)) fail(`${name} is not an ARKit blendshape`);
  const scalars = [json.placement?.heightScale, json.placement?.widthScale, json.placement?.centerY, json.limits?.maxYaw,
    json.limits?.maxPitch, json.limits?.lidGap, json.limits?.lipGap, json.limits?.lowerLipThickness,
    json.limits?.upperLipThickness, json.irisRadius, json.gaze?.irisTravelX, json.gaze?.irisTravelY, json.gaze?.lidFollow,
    json.skinLoopHiding?.from, json.skinLoopHiding?.to, json.skinLoopHiding?.push];
  if (!scalars.every(isFiniteNumber) || !Array.isArray(json.gaze.lidProfile) || json.gaze.lidProfile.length !== 3
      || !json.gaze.lidProfile.every(isFiniteNumber)) fail('a solve parameter is missing or not finite');
  const styles = {}, backgrounds = {};
  for (const [name, s] of Object.entries(json.styles ?? {})) styles[name] = parseStyle(name, s);
  for (const [name, b] of Object.entries(json.backgrounds ?? {})) backgrounds[name] = parseBackground(name, b);
  if (!styles[json.defaultStyle] || !backgrounds[json.defaultBackground]) fail('default style or background missing');
  return {
    version: json.version,
    layout: { ...L },
    placement: { ...json.placement },
    pivot: vectors([json.pivot], 1, 'pivot'),
    limits: { ...json.limits },
    irisRadius: json.irisRadius,
    gaze: { ...json.gaze, lidProfile: [...json.gaze.lidProfile] },
    skinLoopHiding: { ...json.skinLoopHiding },
    points: vectors(json.points, n, 'points'),
    shapes,
    outlineDirections: vectors(json.outlineDirections, L.meridians, 'outlineDirections'),
    hairDirections: vectors(json.hairDirections, L.meridians, 'hairDirections'),
    skinLoopNormals: vectors(json.skinLoopNormals, L.skinLoopCount, 'skinLoopNormals'),
    styles, backgrounds,
    defaultStyle: json.defaultStyle, defaultBackground: json.defaultBackground,
  };
}

const EYE_LOOKS = new Set(['eyeLookUpLeft', 'eyeLookDownLeft', 'eyeLookInLeft', 'eyeLookOutLeft', 'eyeLookUpRight',
  'eyeLookDownRight', 'eyeLookInRight', 'eyeLookOutRight'].map((name) => BLEND_SHAPES.indexOf(name)));
const JAW_OPEN = BLEND_SHAPES.indexOf('jawOpen'), CHEEK_PUFF = BLEND_SHAPES.indexOf('cheekPuff');
const TONGUE_OUT = BLEND_SHAPES.indexOf('tongueOut');

const smoothstep = (e0, e1, x) => {
  const t = Math.min(Math.max((x - e0) / (e1 - e0), 0), 1);
  return t * t * (3 - 2 * t);
};

// Sides are the person's own, as in Swift's FaceSide: 'left' is drawn on the viewer's right.
const SIDES = ['left', 'right'];

/**
 * The canonical face posed by one expression and projected into a view: points (x, y per control
 * point), the silhouettes and the skin loop. Filled by `AvatarRenderer.solve`.
 */
class Pose {
  constructor(rig) {
    const L = rig.layout;
    this.rig = rig;
    this.work = new Float64Array(3 * L.pointCount);
    this.x = new Float64Array(L.pointCount);
    this.y = new Float64Array(L.pointCount);
    this.outline = Array.from({ length: L.meridians }, () => [0, 0]);
    this.hairOutline = Array.from({ length: L.meridians }, () => [0, 0]);
    this.skinLoop = Array.from({ length: L.skinLoopCount }, () => [0, 0]);
    this.rotation = [[1, 0, 0], [0, 1, 0], [0, 0, 1]];
    this.scale = 1;
    this.center = [0, 0];
    this.headPose = { yaw: 0, pitch: 0, roll: 0 };
  }
  point(i) { return [this.x[i], this.y[i]]; }
  get irisRadius() { return this.rig.irisRadius * this.scale; }
  /** Projects a rig direction (x right, y up) to the screen (y down), not normalised. */
  screenDirection(v) {
    const r = this.rotation;
    return [r[0][0] * v[0] + r[0][1] * v[1] + r[0][2] * v[2], -(r[1][0] * v[0] + r[1][1] * v[1] + r[1][2] * v[2])];
  }
  /** The largest inner-lip gap in pixels. */
  get mouthOpening() {
    const L = this.rig.layout;
    let gap = 0;
    for (let k = 0; k < 3; k++) gap = Math.max(gap, Math.hypot(this.x[L.upperInner + k] - this.x[L.lowerInner + k], this.y[L.upperInner + k] - this.y[L.lowerInner + k]));
    return gap;
  }
}

// Point indices by side, as RigPoint in Swift.
function indices(L) {
  const eye = (side) => (side === 'right' ? L.rightEye : L.leftEye);
  return {
    eye,
    upperLid: (side, k) => eye(side) + 1 + k,
    lowerLid: (side, k) => eye(side) + 7 - k,
    innerCorner: (side) => eye(side),
    outerCorner: (side) => eye(side) + 4,
    iris: (side) => eye(side) + 8,
    brow: (side) => (side === 'right' ? L.rightBrow : L.leftBrow),
    alar: (side) => (side === 'right' ? L.rightAlar : L.leftAlar),
    nostril: (side) => (side === 'right' ? L.rightNostril : L.leftNostril),
    bridge: (side) => (side === 'right' ? L.rightBridge : L.leftBridge),
    corner: (side) => (side === 'right' ? L.rightCorner : L.leftCorner),
    cheek: (side) => (side === 'right' ? L.rightCheek : L.leftCheek),
    ear: (side) => (side === 'right' ? L.rightEar : L.leftEar),
  };
}

// MARK: drawing primitives with the Swift Canvas protocol's semantics (fill, stroke and clip
// consume the path; round caps and joins).

function addSmoothCurve(ctx, count, closed, continuing, point) {
  if (count <= 0) return;
  const first = point(0);
  if (continuing && !closed) ctx.lineTo(first[0], first[1]); else ctx.moveTo(first[0], first[1]);
  if (count === 1) { if (closed) ctx.closePath(); return; }
  const k = 1 / 6;
  const at = (i) => (closed ? point(((i % count) + count) % count) : point(Math.min(Math.max(i, 0), count - 1)));
  const segments = closed ? count : count - 1;
  for (let i = 0; i < segments; i++) {
    const p0 = at(i - 1), p1 = at(i), p2 = at(i + 1), p3 = at(i + 2);
    ctx.bezierCurveTo(p1[0] + (p2[0] - p0[0]) * k, p1[1] + (p2[1] - p0[1]) * k,
      p2[0] - (p3[0] - p1[0]) * k, p2[1] - (p3[1] - p1[1]) * k, p2[0], p2[1]);
  }
  if (closed) ctx.closePath();
}

function addEllipse(ctx, x, y, w, h) {
  if (!(w > 0 && h > 0)) return;
  const cx = x + w / 2, cy = y + h / 2;
  ctx.moveTo(cx + w / 2, cy);
  ctx.ellipse(cx, cy, w / 2, h / 2, 0, 0, 2 * Math.PI);
  ctx.closePath();
}

function addCircle(ctx, c, r) { addEllipse(ctx, c[0] - r, c[1] - r, 2 * r, 2 * r); }

function paintStyle(ctx, paint) {
  if (paint.linear) {
    const g = paint.linear;
    const gradient = ctx.createLinearGradient(g.start[0], g.start[1], g.end[0], g.end[1]);
    gradient.addColorStop(0, css(g.from)); gradient.addColorStop(1, css(g.to));
    return gradient;
  }
  if (paint.radial) {
    const g = paint.radial;
    const gradient = ctx.createRadialGradient(g.center[0], g.center[1], 0, g.center[0], g.center[1], Math.max(g.radius, 0));
    gradient.addColorStop(0, css(g.from)); gradient.addColorStop(1, css(g.to));
    return gradient;
  }
  return css(paint);
}

function fill(ctx, paint, rule = 'nonzero') {
  ctx.fillStyle = paintStyle(ctx, paint);
  ctx.fill(rule);
  ctx.beginPath();
}

function stroke(ctx, c, width) {
  if (width > 0) {
    ctx.strokeStyle = css(c);
    ctx.lineWidth = width;
    ctx.lineCap = 'round';
    ctx.lineJoin = 'round';
    ctx.stroke();
  }
  ctx.beginPath();
}

function fillAndStroke(ctx, paint, c, width) {
  ctx.fillStyle = paintStyle(ctx, paint);
  ctx.fill('nonzero');
  stroke(ctx, c, width);
}

function clipPath(ctx, rule = 'nonzero') { ctx.clip(rule); ctx.beginPath(); }

function clipRect(ctx, r) {
  ctx.beginPath();
  ctx.rect(r.x, r.y, Math.max(r.width, 0), Math.max(r.height, 0));
  ctx.clip();
  ctx.beginPath();
}

/** Replaces every pixel inside the current clip with `c` (no blending). */
function clearClip(ctx, c) {
  ctx.save();
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.globalCompositeOperation = 'copy';
  ctx.fillStyle = css(c);
  ctx.fillRect(0, 0, ctx.canvas.width, ctx.canvas.height);
  ctx.restore();
  ctx.beginPath();
}

function bounding(points) {
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const p of points) { x0 = Math.min(x0, p[0]); y0 = Math.min(y0, p[1]); x1 = Math.max(x1, p[0]); y1 = Math.max(y1, p[1]); }
  if (!points.length) return { x: 0, y: 0, width: 0, height: 0 };
  return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
}
const expanded = (r, m) => ({ x: r.x - m, y: r.y - m, width: r.width + 2 * m, height: r.height + 2 * m });

/** The rectangle an image is drawn into so that it covers `rect` with its aspect ratio kept, centred. */
export function coverRect(imageWidth, imageHeight, rect) {
  if (!(imageWidth > 0 && imageHeight > 0)) return rect;
  const scale = Math.max(rect.width / imageWidth, rect.height / imageHeight);
  const w = imageWidth * scale, h = imageHeight * scale;
  const cx = rect.x + rect.width / 2, cy = rect.y + rect.height / 2;
  return { x: cx - w / 2, y: cy - h / 2, width: w, height: h };
}

// MARK: the renderer

/**
 * Draws the canonical avatar for an expression ({ coefficients (52, ARKit order), headPose
 * { yaw, pitch, roll } in degrees, gaze { x, y } | null }, as `decodeFrame` returns) into a
 * rectangle of a canvas. Keeps its pose between frames; one renderer per canvas.
 */
export class AvatarRenderer {
  constructor(rig) {
    if (!rig || !rig.layout || !rig.points) throw new TypeError('AvatarRenderer needs a rig from loadRig or parseRig');
    this.rig = rig;
    this.pose = new Pose(rig);
    this.i = indices(rig.layout);
  }

  /**
   * Draws `expression` into `rect` ({ x, y, width, height }; the whole canvas by default) of `ctx`:
   * the background, then the avatar. `options.style`: a style name of STYLES (default the rig's);
   * `options.background`: a name of BACKGROUNDS (default the rig's), a '#rrggbb' colour, or an image
   * (HTMLImageElement, ImageBitmap, canvas) drawn to cover the view. Nothing is drawn outside `rect`.
   */
  draw(ctx, expression, rect, options = {}) {
    const r = rect ?? { x: 0, y: 0, width: ctx.canvas.width, height: ctx.canvas.height };
    const style = this.resolveStyle(options.style);
    this.solve(expression, r);
    ctx.save();
    ctx.beginPath();
    clipRect(ctx, r);
    this.drawBackground(ctx, options.background, r);
    if (style.kind === 'sketch') this.drawSketch(ctx, style, expression);
    else this.drawMask(ctx, style, r, expression);
    ctx.restore();
    ctx.beginPath();
  }

  resolveStyle(style) {
    if (style && typeof style === 'object' && (style.kind === 'mask' || style.kind === 'sketch')) return style;
    const name = style ?? this.rig.defaultStyle;
    const resolved = this.rig.styles[name];
    if (!resolved) throw new RangeError(`unknown avatar style ${name}; styles: ${Object.keys(this.rig.styles).join(', ')}`);
    return resolved;
  }

  /** Fills `rect` with a background (replacing what was there). */
  drawBackground(ctx, background, rect) {
    let b = background ?? this.rig.defaultBackground;
    ctx.save();
    clipRect(ctx, rect);
    if (typeof b === 'string') {
      const c = parseColor(b);
      if (c) b = { kind: 'solid', color: c };
      else if (this.rig.backgrounds[b]) b = this.rig.backgrounds[b];
      else throw new RangeError(`unknown background ${b}; backgrounds: ${Object.keys(this.rig.backgrounds).join(', ')}, #rrggbb or an image`);
    }
    if (b.kind === 'solid') {
      clearClip(ctx, b.color);
    } else if (b.kind === 'gradient') {
      clearClip(ctx, CLEAR);
      ctx.rect(rect.x, rect.y, rect.width, rect.height);
      fill(ctx, { linear: { start: [rect.x, rect.y], end: [rect.x, rect.y + rect.height], from: b.top, to: b.bottom } });
    } else if (b.kind === 'none') {
      clearClip(ctx, CLEAR);
    } else {
      clearClip(ctx, BLACK);
      const w = b.naturalWidth ?? b.videoWidth ?? b.width, h = b.naturalHeight ?? b.videoHeight ?? b.height;
      if (w > 0 && h > 0) {
        const c = coverRect(w, h, rect);
        ctx.drawImage(b, c.x, c.y, c.width, c.height);
      }
    }
    ctx.restore();
  }

  // MARK: solve (Sources/VeilRender/AvatarRig.swift)

  /** Poses the face for `expression` and projects it into `rect`; the result is `this.pose`. */
  solve(expression, rect) {
    const rig = this.rig, L = rig.layout, I = this.i, work = this.pose.work;
    work.set(rig.points);
    const coefficients = expression?.coefficients ?? [];
    const gaze = expression?.gaze ?? null;
    for (let shape = 0; shape < rig.shapes.length && shape < coefficients.length; shape++) {
      const field = rig.shapes[shape];
      const c = Math.min(Number(coefficients[shape]), 1);
      if (!field || !(c > 0.0005) || (gaze && EYE_LOOKS.has(shape))) continue;
      const { points, offsets } = field;
      for (let d = 0; d < points.length; d++) {
        const j = 3 * points[d];
        work[j] += c * offsets[3 * d]; work[j + 1] += c * offsets[3 * d + 1]; work[j + 2] += c * offsets[3 * d + 2];
      }
    }
    if (gaze) {
      const clampAxis = (v) => (Number.isFinite(v) ? Math.min(Math.max(v, -1), 1) : 0);
      const gx = clampAxis(Number(gaze.x)), gy = clampAxis(Number(gaze.y));
      for (const side of SIDES) {
        const j = 3 * I.iris(side);
        work[j] += gx * rig.gaze.irisTravelX; work[j + 1] += gy * rig.gaze.irisTravelY;
        if (gy < 0) for (let k = 0; k < 3; k++) work[3 * I.upperLid(side, k) + 1] += gy * rig.gaze.lidFollow * rig.gaze.lidProfile[k];
      }
    }
    this.constrain(work);
    this.project(expression?.headPose ?? {}, rect);
  }

  /** Lids and lips never cross, however the displacements sum. */
  constrain(work) {
    const L = this.rig.layout, I = this.i, lim = this.rig.limits;
    const Y = (i) => 3 * i + 1;
    for (const side of SIDES) {
      for (let k = 0; k < 3; k++) {
        const lower = work[Y(I.lowerLid(side, k))], u = Y(I.upperLid(side, k));
        if (work[u] < lower + lim.lidGap) work[u] = lower + lim.lidGap;
      }
    }
    for (let k = 0; k < 3; k++) {
      const ui = Y(L.upperInner + k), li = Y(L.lowerInner + k), lo = Y(L.lowerOuter + k);
      if (work[li] > work[ui] - lim.lipGap) work[li] = work[ui] - lim.lipGap;
      if (work[lo] > work[li] - lim.lowerLipThickness) work[lo] = work[li] - lim.lowerLipThickness;
    }
    for (let k = 0; k < 5; k++) {
      const uo = Y(L.upperOuter + k), ui = Y(L.upperInner + Math.min(Math.max(k - 1, 0), 2));
      if (work[uo] < work[ui] + lim.upperLipThickness) work[uo] = work[ui] + lim.upperLipThickness;
    }
  }

  project(headPose, rect) {
    const rig = this.rig, L = rig.layout, pose = this.pose;
    const finite = (v, limit) => (Number.isFinite(v) ? Math.min(Math.max(v, -limit), limit) : 0);
    const clamped = { yaw: finite(Number(headPose.yaw ?? 0), rig.limits.maxYaw), pitch: finite(Number(headPose.pitch ?? 0), rig.limits.maxPitch),
      roll: finite(Number(headPose.roll ?? 0), 180) };
    const deg = Math.PI / 180;
    const cy = Math.cos(clamped.yaw * deg), sy = Math.sin(clamped.yaw * deg);
    const cp = Math.cos(clamped.pitch * deg), sp = Math.sin(clamped.pitch * deg);
    const cr = Math.cos(clamped.roll * deg), sr = Math.sin(clamped.roll * deg);
    // R = Roll · Pitch · Yaw. Yaw: front (+z) moves to +x. Pitch: front moves up (+y). Roll:
    // clockwise on screen.
    const yawM = [[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]];
    const pitchM = [[1, 0, 0], [0, cp, sp], [0, -sp, cp]];
    const rollM = [[cr, sr, 0], [-sr, cr, 0], [0, 0, 1]];
    const multiply = (a, b) => a.map((row) => [0, 1, 2].map((c) => row[0] * b[0][c] + row[1] * b[1][c] + row[2] * b[2][c]));
    const r = multiply(rollM, multiply(pitchM, yawM));
    const w = Number.isFinite(rect.width) ? Math.max(rect.width, 0) : 0, h = Number.isFinite(rect.height) ? Math.max(rect.height, 0) : 0;
    const scale = Math.min(h * rig.placement.heightScale, w * rig.placement.widthScale);
    const center = [(Number.isFinite(rect.x) ? rect.x : 0) + w / 2, (Number.isFinite(rect.y) ? rect.y : 0) + h * rig.placement.centerY];
    pose.rotation = r; pose.scale = scale; pose.center = center; pose.headPose = clamped;
    const pv = rig.pivot;
    const dot = (row, x, y, z) => row[0] * x + row[1] * y + row[2] * z;
    const shift = [pv[0] - dot(r[0], pv[0], pv[1], pv[2]), pv[1] - dot(r[1], pv[0], pv[1], pv[2]), pv[2] - dot(r[2], pv[0], pv[1], pv[2])];
    const work = pose.work;
    for (let i = 0; i < L.pointCount; i++) {
      const x = work[3 * i], y = work[3 * i + 1], z = work[3 * i + 2];
      pose.x[i] = center[0] + scale * (dot(r[0], x, y, z) + shift[0]);
      pose.y[i] = center[1] - scale * (dot(r[1], x, y, z) + shift[1]);
    }
    this.silhouette(L.headGrid, rig.outlineDirections, pose.outline);
    this.silhouette(L.hairGrid, rig.hairDirections, pose.hairOutline);
    // The skin loop's hidden parts are pushed out beyond the silhouette along their projected
    // normal, so that the region it encloses is the visible skin once clipped to the outline.
    const hc = [pose.x[L.headCenter], pose.y[L.headCenter]];
    const hiding = rig.skinLoopHiding, normals = rig.skinLoopNormals;
    for (let k = 0; k < L.skinLoopCount; k++) {
      const nx = normals[3 * k], ny = normals[3 * k + 1], nz = normals[3 * k + 2];
      const normalZ = dot(r[2], nx, ny, nz);
      const q = [pose.x[L.skinLoop + k], pose.y[L.skinLoop + k]];
      const hidden = smoothstep(hiding.from, hiding.to, normalZ);
      if (hidden > 0) {
        let d = [dot(r[0], nx, ny, nz), -dot(r[1], nx, ny, nz)];
        let len = Math.hypot(d[0], d[1]);
        if (len < 0.15) { d = [q[0] - hc[0], q[1] - hc[1]]; len = Math.hypot(d[0], d[1]); }
        if (len > 1e-6) { q[0] += d[0] / len * (hiding.push * scale * hidden); q[1] += d[1] / len * (hiding.push * scale * hidden); }
      }
      pose.skinLoop[k] = q;
    }
  }

  /** Per meridian, the projected sample farthest out along its projected direction, refined with a parabola. */
  silhouette(grid, directions, out) {
    const pose = this.pose, L = this.rig.layout, samples = L.depthSamples;
    const cx = pose.x[L.headCenter], cy = pose.y[L.headCenter];
    for (let m = 0; m < L.meridians; m++) {
      let dir = pose.screenDirection([directions[3 * m], directions[3 * m + 1], directions[3 * m + 2]]);
      const len = Math.hypot(dir[0], dir[1]);
      dir = len > 1e-6 ? [dir[0] / len, dir[1] / len] : [1, 0];
      const start = grid + m * samples;
      const along = (j) => (pose.x[start + j] - cx) * dir[0] + (pose.y[start + j] - cy) * dir[1];
      let best = 0, bestValue = -Infinity;
      for (let j = 0; j < samples; j++) { const v = along(j); if (v > bestValue) { bestValue = v; best = j; } }
      let px = pose.x[start + best], py = pose.y[start + best];
      if (best > 0 && best < samples - 1) {
        const a = along(best - 1), c = along(best + 1);
        const denom = a - 2 * bestValue + c;
        if (denom < -1e-9) {
          const delta = Math.min(Math.max(0.5 * (a - c) / denom, -0.5), 0.5);
          const nb = start + best + (delta > 0 ? 1 : -1);
          px += (pose.x[nb] - px) * Math.abs(delta); py += (pose.y[nb] - py) * Math.abs(delta);
        }
      }
      out[m] = [px, py];
    }
  }

  // MARK: paths of the posed face (Sources/VeilRender/AvatarRenderer.swift)

  addOutline(ctx) { const o = this.pose.outline; addSmoothCurve(ctx, o.length, true, false, (i) => o[i]); }

  addEye(ctx, side) {
    this.addUpperLid(ctx, side);
    const p = this.pose, I = this.i;
    const inner = I.innerCorner(side), outer = I.outerCorner(side);
    addSmoothCurve(ctx, 5, false, true, (i) => p.point(i === 0 ? outer : i === 4 ? inner : I.lowerLid(side, 3 - i)));
    ctx.closePath();
  }

  addUpperLid(ctx, side) {
    const p = this.pose, I = this.i;
    const inner = I.innerCorner(side), outer = I.outerCorner(side);
    addSmoothCurve(ctx, 5, false, false, (i) => p.point(i === 0 ? inner : i === 4 ? outer : I.upperLid(side, i - 1)));
  }

  addLowerLid(ctx, side) {
    const p = this.pose, I = this.i;
    const inner = I.innerCorner(side), outer = I.outerCorner(side);
    addSmoothCurve(ctx, 5, false, false, (i) => p.point(i === 0 ? inner : i === 4 ? outer : I.lowerLid(side, i - 1)));
  }

  addLipEdge(ctx, first, count, reversed, continuing) {
    const p = this.pose, L = this.rig.layout, n = count + 2;
    addSmoothCurve(ctx, n, false, continuing, (i) => {
      const j = reversed ? n - 1 - i : i;
      return p.point(j === 0 ? L.rightCorner : j === n - 1 ? L.leftCorner : first + j - 1);
    });
  }

  addMouthOpening(ctx) {
    const L = this.rig.layout;
    this.addLipEdge(ctx, L.upperInner, 3, false, false);
    this.addLipEdge(ctx, L.lowerInner, 3, true, true);
    ctx.closePath();
  }

  addOuterLips(ctx) {
    const L = this.rig.layout;
    this.addLipEdge(ctx, L.upperOuter, 5, false, false);
    this.addLipEdge(ctx, L.lowerOuter, 3, true, true);
    ctx.closePath();
  }

  addNoseBottom(ctx) {
    const p = this.pose, I = this.i, L = this.rig.layout;
    const order = [I.alar('right'), I.nostril('right'), L.columella, I.nostril('left'), I.alar('left')];
    addSmoothCurve(ctx, 5, false, false, (i) => p.point(order[i]));
  }

  /** The nose's side line on the side the face turns towards. */
  addNoseSide(ctx) {
    const p = this.pose, I = this.i, L = this.rig.layout;
    const b = I.bridge(p.headPose.yaw >= 0 ? 'left' : 'right');
    addSmoothCurve(ctx, 3, false, false, (i) => p.point(i === 0 ? b : i === 1 ? b + 1 : L.noseTip));
  }

  /** A brow as a filled shape, thick at the inner end and tapering outwards. */
  addBrowShape(ctx, side, thickness) {
    const p = this.pose, start = this.i.brow(side);
    const taper = [1.0, 1.0, 0.88, 0.68, 0.42];
    const edge = [];
    const normal = (k) => {
      const a = p.point(start + Math.max(k - 1, 0)), b = p.point(start + Math.min(k + 1, 4));
      const n = [a[1] - b[1], b[0] - a[0]];
      const len = Math.hypot(n[0], n[1]);
      return len > 1e-6 ? [n[0] / len, n[1] / len] : [0, -1];
    };
    for (let k = 0; k < 5; k++) {
      const n = normal(k), q = p.point(start + k), t = thickness * taper[k] / 2;
      edge.push([q[0] + n[0] * t, q[1] + n[1] * t]);
    }
    for (let k = 4; k >= 0; k--) {
      const n = normal(k), q = p.point(start + k), t = thickness * taper[k] / 2;
      edge.push([q[0] - n[0] * t, q[1] - n[1] * t]);
    }
    addSmoothCurve(ctx, 5, false, false, (i) => edge[i]);
    addSmoothCurve(ctx, 5, false, true, (i) => edge[5 + i]);
    ctx.closePath();
  }

  addBrowLine(ctx, side) {
    const p = this.pose, start = this.i.brow(side);
    addSmoothCurve(ctx, 5, false, false, (i) => p.point(start + i));
  }

  // MARK: sketch (Sources/VeilRender/AvatarRenderer+Styles.swift)

  drawSketch(ctx, style, expression) {
    const pose = this.pose, s = pose.scale;
    if (!(s > 0.5)) return;
    const lw = Math.max(1, style.lineWidth * 2 * s);
    const ink = style.lineColor, fine = Math.max(1, lw * 0.8);
    this.addOutline(ctx);
    stroke(ctx, ink, lw);
    ctx.save();
    if (!this.featuresInsideOutline(0)) { this.addOutline(ctx); clipPath(ctx); }
    for (const side of SIDES) {
      this.addBrowLine(ctx, side);
      stroke(ctx, ink, lw * 1.35);
      ctx.save();
      this.addEye(ctx, side);
      clipPath(ctx);
      const iris = pose.point(this.i.iris(side)), r = pose.irisRadius;
      addCircle(ctx, iris, r);
      stroke(ctx, ink, fine);
      addCircle(ctx, iris, r * 0.45);
      fill(ctx, ink);
      ctx.restore();
      this.addEye(ctx, side);
      stroke(ctx, ink, lw);
    }
    this.addNoseSide(ctx);
    stroke(ctx, withAlpha(ink, ink.a * 0.8), fine);
    this.addNoseBottom(ctx);
    stroke(ctx, ink, lw);
    this.addOuterLips(ctx);
    stroke(ctx, ink, lw);
    this.addMouthOpening(ctx);
    if (pose.mouthOpening > lw && style.mouthFillOpacity > 0) {
      fillAndStroke(ctx, withAlpha(ink, ink.a * style.mouthFillOpacity), ink, fine);
    } else {
      stroke(ctx, ink, fine);
    }
    if (coefficient(expression, TONGUE_OUT) > 0.02) { this.addTongue(ctx); stroke(ctx, ink, fine); }
    ctx.restore();
  }

  /** Whether every feature (plus a margin) lies inside the silhouette, so that no clip is needed. */
  featuresInsideOutline(cheekRadius) {
    const pose = this.pose, L = this.rig.layout, I = this.i, o = pose.outline;
    const c = [pose.x[L.headCenter], pose.y[L.headCenter]];
    const margin = pose.scale * 0.06, cosLimit = 0.978;
    for (let i = 0; i < I.ear('right'); i++) {
      const isCheek = i === I.cheek('left') || i === I.cheek('right');
      const d = [pose.x[i] - c[0], pose.y[i] - c[1]];
      const r = Math.hypot(d[0], d[1]);
      const needed = r + (isCheek ? cheekRadius : 0) + margin;
      if (!(r > 1e-3)) continue;
      let limit = Infinity;
      for (const v of o) {
        const e = [v[0] - c[0], v[1] - c[1]];
        const re = Math.hypot(e[0], e[1]);
        if (re > 1e-3 && e[0] * d[0] + e[1] * d[1] > cosLimit * re * r) limit = Math.min(limit, re);
      }
      if (!(needed < limit * 0.98)) return false;
    }
    return true;
  }

  // MARK: mask

  drawMask(ctx, m, rect, expression) {
    const pose = this.pose, s = pose.scale, I = this.i;
    if (!(s > 0.5)) return;
    const px = Math.max(s * 0.01, 0.5);
    if (m.shirt) this.drawBody(ctx, m.shirt, m.skinShade, rect);
    this.drawEars(ctx, m, false);
    if (m.hair) {
      const h = pose.hairOutline;
      addSmoothCurve(ctx, h.length, true, false, (i) => h[i]);
      fill(ctx, m.hair);
      const head = expanded(bounding(pose.outline), 2);
      ctx.save();
      clipRect(ctx, head);
      ctx.rect(head.x, head.y, head.width, head.height);
      this.addSkinLoop(ctx);
      clipPath(ctx, 'evenodd');
      this.addOutline(ctx);
      fill(ctx, m.hair);
      ctx.restore();
      ctx.save();
      clipRect(ctx, head);
      this.addSkinLoop(ctx);
      clipPath(ctx);
      this.addOutline(ctx);
      fill(ctx, m.skin);
      this.addShadowCrescent(ctx, m.shadow);
      ctx.restore();
    } else {
      this.addOutline(ctx);
      fill(ctx, m.skin);
      this.addShadowCrescent(ctx, m.shadow);
    }
    ctx.save();
    if (!this.featuresInsideOutline(s * 0.22)) { this.addOutline(ctx); clipPath(ctx); }
    for (const side of SIDES) {
      const cheek = pose.point(I.cheek(side));
      const radius = s * (0.17 + 0.05 * coefficient(expression, CHEEK_PUFF));
      addCircle(ctx, cheek, radius);
      fill(ctx, { radial: { center: cheek, radius, from: m.blush, to: withAlpha(m.blush, 0) } });
    }
    this.addNoseSide(ctx);
    stroke(ctx, withAlpha(m.skinShade, 0.55), s * 0.035);
    this.addNoseBottom(ctx);
    stroke(ctx, mixed(m.skinShade, m.lashes, 0.25), Math.max(1, s * 0.024));
    this.drawMouth(ctx, m, expression, px);
    for (const side of SIDES) this.drawEye(ctx, m, side);
    for (const side of SIDES) {
      this.addBrowShape(ctx, side, s * 0.062);
      fill(ctx, m.brows);
    }
    ctx.restore();
    this.drawEars(ctx, m, true);
  }

  addShadowCrescent(ctx, c) {
    const pose = this.pose, o = pose.outline, L = this.rig.layout;
    const center = [pose.x[L.headCenter], pose.y[L.headCenter]];
    const shift = [-0.06 * pose.scale, -0.07 * pose.scale];
    addSmoothCurve(ctx, o.length, true, false, (i) => o[i]);
    addSmoothCurve(ctx, o.length, true, false, (i) => [center[0] + (o[i][0] - center[0]) * 0.9 + shift[0],
      center[1] + (o[i][1] - center[1]) * 0.9 + shift[1]]);
    fill(ctx, c, 'evenodd');
  }

  addSkinLoop(ctx) { const loop = this.pose.skinLoop; addSmoothCurve(ctx, loop.length, true, false, (i) => loop[i]); }

  drawBody(ctx, shirt, neck, rect) {
    const s = this.pose.scale, o = this.pose.center;
    const at = (x, y) => [o[0] + x * s, o[1] + y * s];
    const move = (p) => ctx.moveTo(p[0], p[1]), line = (p) => ctx.lineTo(p[0], p[1]);
    const curve = (p, c1, c2) => ctx.bezierCurveTo(c1[0], c1[1], c2[0], c2[1], p[0], p[1]);
    const bottom = Math.max(rect.y + rect.height, o[1] + 1.9 * s) + 1;
    move(at(-0.30, 0.35)); line(at(0.30, 0.35)); line(at(0.34, 1.4)); line(at(-0.34, 1.4));
    ctx.closePath();
    fill(ctx, neck);
    move([o[0] - 1.6 * s, bottom]);
    line(at(-1.6, 1.8));
    curve(at(-0.45, 1.2), at(-1.55, 1.32), at(-0.9, 1.22));
    line(at(0.45, 1.2));
    curve(at(1.6, 1.8), at(0.9, 1.22), at(1.55, 1.32));
    line([o[0] + 1.6 * s, bottom]);
    ctx.closePath();
    fill(ctx, shirt);
    move(at(-0.36, 1.19));
    curve(at(0.36, 1.19), at(-0.3, 1.52), at(0.3, 1.52));
    ctx.closePath();
    fill(ctx, neck);
  }

  /** Ears turned towards the viewer are drawn over the head; the others behind it. */
  drawEars(ctx, m, facingViewer) {
    const pose = this.pose, s = pose.scale, roll = pose.headPose.roll * Math.PI / 180;
    for (const side of SIDES) {
      const sx = side === 'left' ? 1 : -1;
      const facing = sx * pose.rotation[2][0];
      if ((facing > 0.2) !== facingViewer) continue;
      const ear = pose.point(this.i.ear(side));
      const inward = pose.screenDirection([-sx, 0, 0]).map((v) => v * s);
      const rx = s * (0.065 + 0.05 * Math.abs(facing));
      ctx.save();
      ctx.translate(ear[0], ear[1]);
      ctx.rotate(roll);
      addEllipse(ctx, -rx, -0.15 * s, 2 * rx, 0.30 * s);
      ctx.restore();
      fill(ctx, mixed(m.skin, m.skinShade, 0.55));
      ctx.save();
      ctx.translate(ear[0] + inward[0] * 0.02, ear[1] + inward[1] * 0.02);
      ctx.rotate(roll);
      addEllipse(ctx, -rx * 0.5, -0.09 * s, rx, 0.18 * s);
      ctx.restore();
      fill(ctx, withAlpha(m.skinShade, 0.75));
    }
  }

  drawEye(ctx, m, side) {
    const pose = this.pose, s = pose.scale;
    this.addEye(ctx, side);
    fill(ctx, m.eyeWhite);
    ctx.save();
    this.addEye(ctx, side);
    clipPath(ctx);
    const iris = pose.point(this.i.iris(side)), r = pose.irisRadius;
    addCircle(ctx, iris, r);
    fill(ctx, m.iris);
    addCircle(ctx, iris, r * 0.5);
    fill(ctx, m.pupil);
    addCircle(ctx, [iris[0] - 0.35 * r, iris[1] - 0.4 * r], r * 0.27);
    fill(ctx, withAlpha(WHITE, 0.9));
    this.addUpperLid(ctx, side);
    stroke(ctx, withAlpha(m.lashes, 0.25), s * 0.05);
    ctx.restore();
    this.addLowerLid(ctx, side);
    stroke(ctx, mixed(m.skinShade, m.lashes, 0.2), Math.max(0.75, s * 0.012));
    this.addUpperLid(ctx, side);
    stroke(ctx, m.lashes, Math.max(1, s * 0.03));
  }

  drawMouth(ctx, m, expression, px) {
    const pose = this.pose, s = pose.scale, L = this.rig.layout;
    if (pose.mouthOpening > 0.5) {
      this.addMouthOpening(ctx);
      fill(ctx, m.mouthInterior);
      ctx.save();
      this.addMouthOpening(ctx);
      clipPath(ctx);
      let down = pose.screenDirection([0, -1, 0]);
      const len = Math.hypot(down[0], down[1]);
      down = len > 1e-6 ? [down[0] / len, down[1] / len] : [0, 1];
      const li = pose.point(L.lowerInner + 1);
      addEllipse(ctx, li[0] - 0.11 * s, li[1] - 0.06 * s, 0.22 * s, 0.1 * s);
      fill(ctx, mixed(m.tongue, m.mouthInterior, 0.35));
      this.addTeeth(ctx, L.upperInner, [down[0] * 0.055 * s, down[1] * 0.055 * s]);
      fill(ctx, m.teeth);
      this.addTeeth(ctx, L.lowerInner, [down[0] * -0.035 * s, down[1] * -0.035 * s]);
      fill(ctx, mixed(m.teeth, m.mouthInterior, 0.12));
      ctx.restore();
    }
    // Lower lip, the tongue when out, then the upper lip over both.
    this.addLipEdge(ctx, L.lowerInner, 3, false, false);
    this.addLipEdge(ctx, L.lowerOuter, 3, true, true);
    ctx.closePath();
    fill(ctx, mixed(m.lips, WHITE, 0.08));
    if (coefficient(expression, TONGUE_OUT) > 0.02) {
      this.addTongue(ctx);
      fill(ctx, m.tongue);
    }
    this.addLipEdge(ctx, L.upperOuter, 5, false, false);
    this.addLipEdge(ctx, L.upperInner, 3, true, true);
    ctx.closePath();
    fill(ctx, m.lips);
    this.addLipEdge(ctx, L.upperInner, 3, false, false);
    stroke(ctx, withAlpha(m.mouthInterior, 0.85), Math.max(px * 1.6, s * 0.016));
  }

  addTeeth(ctx, first, offset) {
    const pose = this.pose, L = this.rig.layout;
    this.addLipEdge(ctx, first, 3, false, false);
    addSmoothCurve(ctx, 5, false, true, (i) => {
      const j = 4 - i;
      const q = pose.point(j === 0 ? L.rightCorner : j === 4 ? L.leftCorner : first + j - 1);
      return [q[0] + offset[0], q[1] + offset[1]];
    });
    ctx.closePath();
  }

  addTongue(ctx) {
    const pose = this.pose, L = this.rig.layout;
    const a = pose.point(L.lowerInner), b = pose.point(L.lowerInner + 2), tip = pose.point(L.tongue);
    const mid = [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2];
    const bottom = [tip[0], Math.max(tip[1], mid[1])];
    ctx.moveTo(a[0], a[1]);
    ctx.bezierCurveTo(a[0], bottom[1], bottom[0] - (b[0] - a[0]) * 0.35, bottom[1], bottom[0], bottom[1]);
    ctx.bezierCurveTo(bottom[0] + (b[0] - a[0]) * 0.35, bottom[1], b[0], bottom[1], b[0], b[1]);
    ctx.closePath();
  }
}

function coefficient(expression, index) {
  const v = Number(expression?.coefficients?.[index] ?? 0);
  return Number.isFinite(v) ? v : 0;
}
