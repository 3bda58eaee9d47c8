// NumPy's default generator replayed in the browser, so that a visitor's GPU sums the page's own vector
// without downloading it (float32 values identical to the server's but in rare cases, which the digest catches): PCG64 (XSL-RR output) from the state the server sends, then NumPy's own
// transforms (random(), the ziggurat standard_normal, lognormal) in float64, rounded once to float32.
// The ziggurat's tables arrive from the server, which derives them from the installed NumPy
// (core/arith/numpy_stream.py). A digest of the float32 bits lets the server check the result.

const MULT = [0xf645, 0x9fcc, 0xdf64, 0x4385, 0x5da4, 0x1fc6, 0xed05, 0x2360]; // PCG64's multiplier, 16-bit limbs

function limbs(hex) { // 128-bit hex string -> eight 16-bit limbs, least significant first
  const h = hex.padStart(32, "0");
  const out = [];
  for (let i = 0; i < 8; i++) out.push(parseInt(h.slice(28 - 4 * i, 32 - 4 * i), 16));
  return out;
}

export function pcg64(stateHex, incHex) {
  const s = limbs(stateHex), inc = limbs(incHex), r = new Array(8).fill(0);
  const out = [0, 0]; // [high 32 bits, low 32 bits] of the last 64-bit output
  function next() { // state = state * MULT + inc (mod 2^128), then the XSL-RR output of the new state
    for (let k = 0; k < 8; k++) {
      let acc = inc[k];
      for (let i = 0; i <= k; i++) acc += s[i] * MULT[k - i]; // each product < 2^32: exact in a double
      r[k] = acc;
    }
    let carry = 0;
    for (let k = 0; k < 8; k++) {
      const v = r[k] + carry;
      s[k] = v % 65536;
      carry = Math.floor(v / 65536);
    }
    const w0 = s[0] | (s[1] << 16), w1 = s[2] | (s[3] << 16), w2 = s[4] | (s[5] << 16), w3 = s[6] | (s[7] << 16);
    let xh = (w3 ^ w1) >>> 0, xl = (w2 ^ w0) >>> 0;
    let rot = w3 >>> 26;
    if (rot >= 32) { const t = xh; xh = xl; xl = t; rot -= 32; }
    if (rot > 0) {
      const nl = ((xl >>> rot) | (xh << (32 - rot))) >>> 0;
      const nh = ((xh >>> rot) | (xl << (32 - rot))) >>> 0;
      xh = nh; xl = nl;
    }
    out[0] = xh; out[1] = xl;
    return out;
  }
  return next;
}

const TWO32 = 4294967296;

export function numpyStream(recipe) {
  const next = pcg64(recipe.state, recipe.inc);
  function nextDouble() { // (u64 >> 11) * 2^-53
    const w = next();
    return (w[0] * 2097152 + (w[1] >>> 11)) / 9007199254740992;
  }
  const z = recipe.ziggurat;
  function standardNormal() {
    for (;;) {
      const w = next();
      const hi = w[0], lo = w[1];
      const idx = lo & 0xff;
      const sign = (lo >>> 8) & 1;
      const rabs = (hi & 0x1fffffff) * 8388608 + (lo >>> 9); // bits 9..60: 52 bits, exact
      let x = rabs * z.wi[idx];
      if (sign) x = -x;
      if (rabs < z.ki[idx]) return x;
      if (idx === 0) {
        for (;;) {
          const xx = -z.inv_r * Math.log1p(-nextDouble());
          const yy = -Math.log1p(-nextDouble());
          if (yy + yy > xx * xx) return ((rabs / 256) & 1) ? -(z.r + xx) : z.r + xx;
        }
      }
      if ((z.fi[idx - 1] - z.fi[idx]) * nextDouble() + z.fi[idx] < Math.exp(-0.5 * x * x)) return x;
    }
  }
  const draw = {
    uniform: () => nextDouble(),
    normal: () => standardNormal(),
    lognormal: () => Math.exp(0.0 + recipe.sigma * standardNormal()),
  };
  return { nextDouble, standardNormal, draw };
}

// The page's vector as float32, built in slices so that the page can show progress between them.
export async function buildVector(recipe, onProgress) {
  const n = recipe.n, out = new Float32Array(n);
  const stream = numpyStream(recipe);
  const slice = 131072;
  for (let start = 0; start < n; start += slice) {
    const end = Math.min(n, start + slice);
    if (recipe.kind === "alternating") {
      for (let i = start; i < end; i++) out[i] = (1 + 0.01 * stream.standardNormal()) * (i % 2 === 0 ? 1.0 : -1.0);
    } else {
      const f = stream.draw[recipe.kind];
      for (let i = start; i < end; i++) out[i] = f();
    }
    if (onProgress) await onProgress(end / n);
  }
  return out;
}

// Two 32-bit sums of the float32 bits, weighted by position: the server computes the same (digest()).
export function digest(values) {
  const w = new Uint32Array(values.buffer, values.byteOffset, values.length);
  let d1 = 0, d2 = 0;
  for (let i = 0; i < w.length; i++) {
    d1 = (d1 + Math.imul(w[i], 2 * i + 1)) >>> 0;
    d2 = (d2 + Math.imul(w[i] ^ i, 0x9e3779b1)) >>> 0;
  }
  return [d1, d2];
}
