// A process that handles Ctrl-C itself while its event loop is busy: it prints `ready`, then
// keeps its main thread busy (400 ms of synchronous work at a time); on SIGINT it prints
// `handled` and exits 0. Used by test/entrypoint.test.ts.
process.on('SIGINT', () => {
  process.stdout.write('handled\n');
  process.exit(0);
});
process.stdout.write('ready\n');
const spin = () => {
  const end = Date.now() + 400;
  while (Date.now() < end) { /* busy, as a worker bundling a workflow or a long synchronous step */ }
  setTimeout(spin, 1);
};
spin();
