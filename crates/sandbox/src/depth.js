// Bounds on the engine's native recursion. Boa recurses on the host stack,
// with no bound of its own, through a chain of proxies, a chain of bound
// functions, and `join`/`toString`/`toLocaleString`/`flat`/`JSON.stringify`
// over nested arrays and objects; 100,000 levels overflow the stack and end
// the whole worker. Evaluated once per context before the program: each of
// those built-ins is replaced by one that counts how deep it is (one count for
// all of them, since they nest inside each other) and throws a catchable
// RangeError past MAX_DEPTH, with every intrinsic it needs captured here so a
// program cannot change it. Chains of proxies and bound functions are bounded
// as they are made.
(function () {
  "use strict";
  const MAX_DEPTH = 128;
  const OutOfRange = RangeError;
  const NotAnObject = TypeError;
  const { apply, construct, defineProperty, getOwnPropertyDescriptor } = Reflect;
  const isArray = Array.isArray;
  const createObject = Object.create;
  const arrayProto = Array.prototype;
  const some = arrayProto.some;
  const Depths = WeakMap;
  const getDepth = WeakMap.prototype.get;
  const setDepth = WeakMap.prototype.set;
  const join = arrayProto.join;
  const toLocaleString = arrayProto.toLocaleString;
  const flat = arrayProto.flat;
  const stringify = JSON.stringify;
  const bind = Function.prototype.bind;
  // `calling(f)(self, ...args)` is `f.call(self, ...args)` with no array made
  // per call (these wrappers sit on hot paths).
  const calling = (f) => apply(bind, Function.prototype.call, [f]);
  const callJoin = calling(join);
  const callToLocaleString = calling(toLocaleString);
  const callFlat = calling(flat);
  const callSome = calling(some);
  const callStringify = calling(stringify);
  const NativeProxy = Proxy;
  const nativeRevocable = Proxy.revocable;
  let depth = 0;

  const tooDeep = (what) =>
    new OutOfRange(`${what} nests deeper than ${MAX_DEPTH} levels; the sandbox stops there rather than overflow its stack`);

  // One level deeper (the caller's `finally` leaves it). Not a wrapper
  // around a callback: each level costs one JavaScript frame, well inside the
  // engine's own limit on them.
  function enter(what) {
    if (depth >= MAX_DEPTH) throw tooDeep(what);
    depth++;
  }

  // Replaces `object[name]` by `make(original)`, keeping its name, length and
  // attributes.
  function replace(object, name, make) {
    const descriptor = getOwnPropertyDescriptor(object, name);
    const original = descriptor.value;
    const replacement = make(original);
    defineProperty(replacement, "name", { value: original.name, configurable: true });
    defineProperty(replacement, "length", { value: original.length, configurable: true });
    defineProperty(object, name, { ...descriptor, value: replacement });
  }

  // Methods, not arrows: `new [].join()` must stay a TypeError.
  replace(arrayProto, "join", () => ({
    join(separator) {
      enter("an array joined into a string");
      try {
        return callJoin(this, separator);
      } finally {
        depth--;
      }
    },
  }).join);
  replace(arrayProto, "toLocaleString", () => ({
    toLocaleString(locales, options) {
      enter("an array turned into a string");
      try {
        return callToLocaleString(this, locales, options);
      } finally {
        depth--;
      }
    },
  }).toLocaleString);
  replace(arrayProto, "flat", () => ({
    flat(depth) {
      // Read once, as the engine's own flat reads it.
      const wanted = depth === undefined ? 1 : +depth;
      if (!(wanted > MAX_DEPTH)) return callFlat(this, wanted);
      // Flattened as deep as the bound allows; what still holds an array was
      // deeper than that.
      const flattened = callFlat(this, MAX_DEPTH);
      if (callSome(flattened, isArray)) throw tooDeep("an array flattened with flat()");
      return flattened;
    },
  }).flat);

  replace(JSON, "stringify", () => ({
    stringify(value, replacer, space) {
      // Nothing to nest (and nothing a replacer is asked about beyond it).
      if (replacer === undefined && (typeof value !== "object" || value === null)) {
        return callStringify(JSON, value, replacer, space);
      }
      // The serializer calls the replacer depth first with the holder as
      // `this`: the holders still open are a stack, and its height is how
      // deep the value at hand is. (The first call's holder is the wrapper
      // around `value`, when the stack is empty.)
      // No prototype: a setter the program put on Array.prototype or
      // Object.prototype for an index must not swallow a write.
      const open = createObject(null);
      let height = 0;
      const counting = (given) =>
        function (key, found) {
          while (height > 0 && open[height - 1] !== this) height--;
          if (height >= MAX_DEPTH) throw tooDeep("a value given to JSON.stringify");
          const result = given === undefined ? found : apply(given, this, [key, found]);
          if ((typeof result === "object" && result !== null) || typeof result === "function") {
            open[height++] = result;
          }
          return result;
        };
      if (typeof replacer === "function") return callStringify(JSON, value, counting(replacer), space);
      if (isArray(replacer)) {
        // A list of keys keeps its own order and filter: the depth is checked
        // first, by a pass of its own.
        callStringify(JSON, value, counting(undefined));
        height = 0;
        return callStringify(JSON, value, replacer, space);
      }
      return callStringify(JSON, value, counting(undefined), space);
    },
  }).stringify);

  // Bound functions and proxies: a chain of them is fixed when each link is
  // made (a bound function's target, a proxy's target and handler), so its
  // length is known and bounded then, one count for both kinds since they
  // chain through each other. (A proxy's traps are the program's own
  // functions, which the engine's limit on JavaScript frames bounds.)
  const chained = new Depths();
  const chainDepth = (value) =>
    ((typeof value === "object" && value !== null) || typeof value === "function"
      ? apply(getDepth, chained, [value])
      : undefined) ?? 0;
  const link = (what, ...below) => {
    let level = 0;
    for (let at = 0; at < below.length; at++) {
      const depth = chainDepth(below[at]);
      if (depth > level) level = depth;
    }
    level++;
    if (level > MAX_DEPTH) throw tooDeep(what);
    return level;
  };
  replace(Function.prototype, "bind", () => ({
    bind(...args) {
      const level = link("a chain of bound functions", this);
      const bound = apply(bind, this, args);
      apply(setDepth, chained, [bound, level]);
      return bound;
    },
  }).bind);

  const checked = (target, handler) => link("a chain of proxies", target, handler);
  function GuardedProxy(target, handler) {
    if (new.target === undefined) throw new NotAnObject("Constructor Proxy requires 'new'");
    const level = checked(target, handler);
    const proxy = construct(NativeProxy, [target, handler]);
    apply(setDepth, chained, [proxy, level]);
    return proxy;
  }
  defineProperty(GuardedProxy, "revocable", {
    value: function revocable(target, handler) {
      const level = checked(target, handler);
      const made = apply(nativeRevocable, NativeProxy, [target, handler]);
      apply(setDepth, chained, [made.proxy, level]);
      return made;
    },
    writable: true,
    configurable: true,
  });
  defineProperty(GuardedProxy, "name", { value: "Proxy", configurable: true });
  defineProperty(GuardedProxy, "length", { value: 2, configurable: true });
  defineProperty(globalThis, "Proxy", { value: GuardedProxy, writable: true, configurable: true, enumerable: false });
})();
