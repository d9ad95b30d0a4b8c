// `waitFor(condition, {timeout, interval})`, by the codemode contract.
// Evaluated the first time a program calls `waitFor`, with the real `sleep`
// and every built-in it reads (`Date.now`, `Math.max`, `Number.isInteger`,
// …) captured before the program ran, so a program that replaces any of them
// cannot change how it waits: not the 30 s cap, not the 250 ms least
// interval.
(function (sleep, originals) {
  "use strict";
  const MAX_TIMEOUT = 30000;
  const MIN_INTERVAL = 250;
  const { now, isInteger, isFinite, max, min, round, text, Failure, NotAFunction, OutOfRange } =
    originals;
  return async function waitFor(condition, options) {
    if (typeof condition !== "function") {
      throw new NotAFunction("waitFor(condition, {timeout, interval}) needs a function as its condition");
    }
    const timeout = options?.timeout ?? MAX_TIMEOUT;
    const interval = options?.interval ?? 500;
    if (!isInteger(timeout) || timeout < 0 || timeout > MAX_TIMEOUT) {
      throw new OutOfRange(
        `waitFor timeout must be an integer number of milliseconds from 0 to ${MAX_TIMEOUT}; got ${text(timeout)}`,
      );
    }
    if (typeof interval !== "number" || !isFinite(interval) || interval < 0) {
      throw new OutOfRange(`waitFor interval must be a finite number of milliseconds; got ${text(interval)}`);
    }
    const step = max(round(interval), MIN_INTERVAL);
    const started = now();
    let slept = 0;
    let attempts = 0;
    for (;;) {
      attempts += 1;
      const value = await condition();
      if (value) {
        return value;
      }
      const elapsed = max(now() - started, slept);
      if (elapsed >= timeout) {
        const error = new Failure(
          `waitFor timed out after ${timeout} ms: the condition was still falsy after ${attempts} attempts`,
        );
        error.code = "wait_timeout";
        throw error;
      }
      const pause = min(step, timeout - elapsed);
      await sleep(pause);
      slept += pause;
    }
  };
})
