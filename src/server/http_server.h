// A small asynchronous HTTP/1.1 server (Boost.Beast over Boost.Asio) for the OpenAI API.
//
// A fixed number of I/O threads serve every connection (no thread per connection), so hundreds
// of concurrent streaming clients cost buffers, not threads. Each request is handed to the
// handler with a ResponseWriter; the handler answers at once (send) or later, from any thread
// (the engine's), as one response or as a stream of chunks (server-sent events). A client that
// closes its connection before its response is complete is reported through on_disconnect, so
// its request can be cancelled.
//
// Limits: request header and body sizes (413 for a body over the limit), an idle timeout for
// keep-alive connections, a cap on open connections (new ones are closed at once past it).
// Thread-safety: ResponseWriter methods may be called from any thread; the handler runs on an
// I/O thread and must not block.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace triad::server {

struct HttpRequest {
  std::string method;                       // "GET", "POST", ...
  std::string target;                       // path and query, e.g. "/v1/models"
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A complete response. Ignored after the client disconnected or once a response started.
  virtual void send(int status, const std::string& content_type, std::string body,
                    const HeaderList& extra = {}) = 0;
  // Starts a chunked streaming response (e.g. text/event-stream); then write() any number of
  // times and end() once.
  virtual void start_stream(int status, const std::string& content_type, const HeaderList& extra = {}) = 0;
  virtual void write(std::string data) = 0;
  virtual void end() = 0;
  // Called once, on an I/O thread, if the client goes away before the response is complete.
  // Set it before the work it cancels can finish; if the client is already gone it runs at once.
  virtual void on_disconnect(std::function<void()> fn) = 0;
  virtual bool disconnected() const = 0;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                 // 0: pick a free port (see HttpServer::port())
  int io_threads = 1;
  uint64_t max_body_bytes = 8u << 20;   // larger bodies get 413
  int max_connections = 1024;
  int idle_timeout_s = 120;             // keep-alive connections idle longer are closed
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<ResponseWriter>)>;

class HttpServer {
 public:
  // Binds and listens (throws triad::Error when the address cannot be bound).
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  uint16_t port() const;
  // Runs the I/O threads until stop(); returns when they have finished.
  void run();
  // Stops accepting new connections; open connections keep being served.
  void stop_accepting();
  // Closes every connection and ends run().
  void stop();
  // Calls fn once on SIGINT / SIGTERM (on an I/O thread).
  void on_signal(std::function<void(int)> fn);
  int open_connections() const;

  struct Impl;  // public only so that the connection sessions in the .cpp can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace triad::server
