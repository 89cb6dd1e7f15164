// convoy-bench tune: finds the batching config of a running convoyd that gives the most goodput
// for given SLOs and traffic, through live reloads (tuner.h searches, live_server.h drives the
// server).
#ifndef CONVOY_BENCH_LOADGEN_TUNE_COMMAND_H_
#define CONVOY_BENCH_LOADGEN_TUNE_COMMAND_H_

namespace convoy::bench {

// argv[0] is "tune". Returns the exit code: 0 when a best config was found and written, 1 when
// none was (or the server could not be reached), 2 for bad usage.
int TuneCommand(int argc, char** argv);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_TUNE_COMMAND_H_
