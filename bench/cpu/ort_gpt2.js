// Times ONNX Runtime (CPU, all graph optimizations) on bench/cpu/gpt2_onnx.py's model (or any
// model whose first output is `output`): loads DIR/model.onnx and each input NAME from
// DIR/NAME.npy (int64 ids [1, T], or f32: a decoding step's `past`), runs 3 warm-ups then ITERS
// timed runs, prints JSON: the median and minimum in ms, and the logits' relative error against
// DIR/expected.npy (PyTorch's). Writes nothing.
//
//   ORT=<dir>/node_modules/onnxruntime-node node bench/cpu/ort_gpt2.js DIR [THREADS=2] [ITERS=20]
const fs = require('fs');
const ort = require(process.env.ORT || 'onnxruntime-node');

// A .npy file's array (version 1 header, little-endian '<i8' or '<f4', C order).
function loadNpy(path) {
  const buf = fs.readFileSync(path);
  const hlen = buf.readUInt16LE(8), header = buf.toString('latin1', 10, 10 + hlen);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const data = buf.subarray(10 + hlen);
  const copy = new Uint8Array(data.length);
  copy.set(data);
  if (header.includes("'<i8'")) return {shape, data: new BigInt64Array(copy.buffer)};
  if (header.includes("'<f4'")) return {shape, data: new Float32Array(copy.buffer)};
  throw new Error(`${path}: only <i8 and <f4 arrays are read here`);
}

(async () => {
  const [dir, threads = '2', iters = '20'] = process.argv.slice(2);
  const want = loadNpy(`${dir}/expected.npy`);
  const s = await ort.InferenceSession.create(`${dir}/model.onnx`,
    {intraOpNumThreads: Number(threads), graphOptimizationLevel: 'all'});
  const feeds = {};
  for (const name of s.inputNames) { // each input from DIR/NAME.npy (a decoding step's `past` too)
    const a = loadNpy(`${dir}/${name}.npy`);
    feeds[name] = new ort.Tensor(a.data instanceof BigInt64Array ? 'int64' : 'float32', a.data, a.shape);
  }
  let out;
  for (let i = 0; i < 3; i++) out = await s.run(feeds);
  const ts = [];
  for (let i = 0; i < Number(iters); i++) {
    const t = process.hrtime.bigint();
    out = await s.run(feeds);
    ts.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  ts.sort((a, b) => a - b);
  const got = out.output.data;
  let num = 0, den = 0;
  for (let i = 0; i < want.data.length; i++) {
    num += (got[i] - want.data[i]) ** 2;
    den += want.data[i] ** 2;
  }
  console.log(JSON.stringify({peer: 'onnxruntime-node ' + (ort.env.versions ? ort.env.versions.common : ''),
    threads: Number(threads), median_ms: +ts[ts.length >> 1].toFixed(2), min_ms: +ts[0].toFixed(2),
    rel_error_vs_torch: Math.sqrt(num / den)}));
})();
