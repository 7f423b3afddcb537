// FrameClock's stand-in for the audio thread (frame-clock.js), when the audio clock cannot tick
// (no AudioWorklet, or the audio context is suspended): a dedicated worker, whose timers browsers
// do not throttle in background tabs as they do the page's own. It posts the wall-clock time
// (ms since 1970, as performance.timeOrigin + performance.now()) at a steady rate: each tick is
// scheduled from when it was due, not from when the last one ran, so a late tick does not delay
// the next ones.

let timer = null;

self.onmessage = (event) => {
  clearTimeout(timer);
  timer = null;
  const framesPerSecond = event.data?.framesPerSecond;
  if (!framesPerSecond) return; // anything else stops it
  const period = 1000 / framesPerSecond;
  const now = () => performance.timeOrigin + performance.now();
  let due = now() + period;
  const tick = () => {
    const time = now();
    // Fell behind by more than a period (the machine stalled): start afresh rather than burst.
    if (time - due > period) due = time;
    self.postMessage({ wallMillis: time });
    due += period;
    timer = setTimeout(tick, Math.max(0, due - now()));
  };
  timer = setTimeout(tick, period);
};
