// One operation per element, 256 of each: exp, tanh and log of the arguments the server chose, and an
// addition and two multiply-adds on the page's vector (a * b + c as written, and the fma builtin).
@group(0) @binding(0) var<storage, read> args: array<f32>;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= 256u) {
    return;
  }
  out[i] = exp(args[i]);
  out[256u + i] = tanh(args[256u + i]);
  out[512u + i] = log(args[512u + i]);
  out[768u + i] = v[2u * i] + v[2u * i + 1u];
  out[1024u + i] = v[3u * i] * v[3u * i + 1u] + v[3u * i + 2u];
  out[1280u + i] = fma(v[3u * i], v[3u * i + 1u], v[3u * i + 2u]);
}
