// Load client for scripts/vector_bench.sh: CLIENTS connections, one thread each, send INFER.VSIM one query
// at a time (each waits for its reply), every client running every query once from its own starting
// point. A C++ client keeps the clients' own CPU time (Python's is tens of microseconds a request) out of
// the server's rate on a 2-core machine. Prints "searches N seconds S per_s R" (wall time from the first
// request to the last reply).
//   vsim_clients PORT KEY QUERIES_FILE DIM CLIENTS [VSIM option ...]     e.g. ... 8 COUNT 10 EF 40
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <latch>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s PORT KEY QUERIES_FILE DIM CLIENTS [VSIM option ...]\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string key = argv[2];
  std::ifstream in(argv[3], std::ios::binary);
  const std::string rows((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t row = 4 * std::strtoull(argv[4], nullptr, 10);
  const int clients = std::atoi(argv[5]);
  if (!in || row == 0 || rows.size() % row != 0 || rows.empty() || clients < 1) {
    std::fprintf(stderr, "vsim_clients: bad queries file or arguments\n");
    return 2;
  }
  const size_t n = rows.size() / row;
  std::vector<std::string> options(argv + 6, argv + argc);

  std::vector<redisContext*> conns;
  for (int c = 0; c < clients; ++c) {
    redisContext* ctx = redisConnect("127.0.0.1", port);
    if (!ctx || ctx->err) {
      std::fprintf(stderr, "vsim_clients: cannot connect to port %d\n", port);
      return 1;
    }
    conns.push_back(ctx);
  }
  std::latch start(clients + 1);
  std::vector<int> failed(clients, 0);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      std::vector<const char*> args{"INFER.VSIM", key.c_str(), "FP32", nullptr};
      std::vector<size_t> lens{10, key.size(), 4, row};
      for (const auto& o : options) {
        args.push_back(o.c_str());
        lens.push_back(o.size());
      }
      start.arrive_and_wait();
      for (size_t j = 0; j < n; ++j) {
        args[3] = rows.data() + ((j + n * c / clients) % n) * row;
        auto* reply = static_cast<redisReply*>(redisCommandArgv(conns[c], int(args.size()), args.data(), lens.data()));
        if (!reply || reply->type == REDIS_REPLY_ERROR) {
          if (reply) std::fprintf(stderr, "vsim_clients: %s\n", reply->str);
          failed[c] = 1;
          if (reply) freeReplyObject(reply);
          return;
        }
        freeReplyObject(reply);
      }
    });
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto* ctx : conns) redisFree(ctx);
  for (int f : failed)
    if (f) return 1;
  const double searches = double(n) * clients;
  std::printf("searches %.0f seconds %.3f per_s %.1f\n", searches, seconds, searches / seconds);
  return 0;
}
