// HttpServer: Beast request parsing, hand-written response framing (status line, headers,
// Content-Length or chunked transfer encoding), a write queue per connection on its strand,
// and disconnect detection by waiting for the socket to become readable while a response is
// in progress (end-of-file then means the client left).
// GCC 12 with the sanitizer flags reports -Wmaybe-uninitialized inside Beast's parser (a
// boost::optional it reads only when set): a false positive located in the Boost headers, so the
// suppression must come before they are included.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "server/http_server.h"

#include <utility>  // Boost 1.74's asio uses std::exchange without including it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/log.h"

namespace triad::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

std::string head(int status, const std::string& content_type, const HeaderList& extra, bool keep_alive,
                 const std::string& length_or_chunked) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  h += "Content-Type: " + content_type + "\r\n";
  h += length_or_chunked;
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  h += "\r\n";
  return h;
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opt;
  HttpHandler handler;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::signal_set signals;
  std::atomic<int> n_conn{0};
  std::atomic<bool> accepting{true};
  std::vector<std::thread> threads;
  // Every session ever accepted (weak), so that run() can break the Session <-> Writer reference
  // cycle of those still open when the server stops (their pending handlers are then destroyed
  // with the io_context, and nothing else would free them).
  std::mutex sessions_mu;
  std::vector<std::weak_ptr<void>> sessions;

  Impl(HttpServerOptions o, HttpHandler h)
      : opt(std::move(o)), handler(std::move(h)), ioc(std::max(1, opt.io_threads)), acceptor(ioc),
        signals(ioc) {}

  void do_accept();
};

namespace {

class Session;

class Writer : public ResponseWriter, public std::enable_shared_from_this<Writer> {
 public:
  Writer(std::shared_ptr<Session> s, uint64_t seq) : session_(std::move(s)), seq_(seq) {}
  void send(int status, const std::string& content_type, std::string body, const HeaderList& extra) override;
  void start_stream(int status, const std::string& content_type, const HeaderList& extra) override;
  void write(std::string data) override;
  void end() override;
  void on_disconnect(std::function<void()> fn) override;
  bool disconnected() const override { return gone_.load(); }

  std::shared_ptr<Session> session_;
  uint64_t seq_;
  std::atomic<bool> gone_{false};
  // Strand-only state.
  bool started_ = false, complete_ = false;
  std::function<void()> on_gone_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& srv) : stream_(std::move(socket)), srv_(srv) {}
  ~Session() { --srv_.n_conn; }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

  // ---- Called on the strand.
  void enqueue(std::string bytes) {
    if (closed_) return;
    out_.push_back(std::move(bytes));
    if (!writing_) do_write();
  }
  void response_complete() {
    response_done_ = true;
    if (!writing_) after_response();
  }
  void client_gone() {
    if (closed_) return;
    if (writer_ && !writer_->complete_) {
      writer_->gone_ = true;
      if (writer_->on_gone_) {
        auto fn = std::move(writer_->on_gone_);
        writer_->on_gone_ = nullptr;
        fn();
      }
    }
    close();
  }
  bool keep_alive() const { return keep_alive_; }
  Writer* writer() const { return writer_.get(); }
  // After the io_context has stopped for good (no handler runs any more).
  void release_after_stop() {
    writer_.reset();
    out_.clear();
  }
  auto executor() { return stream_.get_executor(); }
  uint64_t seq() const { return seq_; }

 private:
  void do_read() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(srv_.opt.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(std::chrono::seconds(srv_.opt.idle_timeout_s));
    http::async_read(stream_, buf_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (closed_) return;
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      const bool body = ec == http::error::body_limit;
      const std::string msg = body ? "the request body is larger than " + std::to_string(srv_.opt.max_body_bytes) + " bytes"
                                   : "the request headers are too large";
      const std::string json = "{\"error\":{\"message\":\"" + msg +
                               "\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"" +
                               (body ? "request_too_large" : "headers_too_large") + "\"}}";
      keep_alive_ = false;
      out_.push_back(head(body ? 413 : 431, "application/json", {}, false,
                          "Content-Length: " + std::to_string(json.size()) + "\r\n") + json);
      response_done_ = true;
      if (!writing_) do_write();
      return;
    }
    if (ec) {  // end of stream, timeout, reset, or a malformed request
      if (ec != http::error::end_of_stream && ec != beast::error::timeout && ec != asio::error::eof &&
          ec != asio::error::connection_reset && ec != asio::error::operation_aborted) {
        const std::string json =
            "{\"error\":{\"message\":\"malformed HTTP request: " + ec.message() +
            "\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}";
        keep_alive_ = false;
        out_.push_back(head(400, "application/json", {}, false, "Content-Length: " + std::to_string(json.size()) + "\r\n") + json);
        response_done_ = true;
        if (!writing_) do_write();
        return;
      }
      close();
      return;
    }
    stream_.expires_never();
    http::request<http::string_body> msg = parser_->release();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers[name] = std::string(f.value());
    }
    req.body = std::move(msg.body());
    keep_alive_ = msg.keep_alive() && srv_.accepting.load();
    response_done_ = false;
    ++seq_;
    writer_ = std::make_shared<Writer>(shared_from_this(), seq_);
    watch_disconnect();
    try {
      srv_.handler(std::move(req), writer_);
    } catch (const std::exception& e) {
      log_warn("http: handler threw: ", e.what());
      writer_->send(500, "application/json",
                    "{\"error\":{\"message\":\"internal server error\",\"type\":\"server_error\",\"param\":null,\"code\":null}}",
                    {});
    }
  }

  // While a response is in progress, a readable socket with nothing to read means the client
  // closed it.
  void watch_disconnect() {
    const uint64_t seq = seq_;
    stream_.socket().async_wait(tcp::socket::wait_read, asio::bind_executor(stream_.get_executor(),
        [self = shared_from_this(), seq](beast::error_code ec) {
          if (ec || self->closed_ || seq != self->seq_ || self->response_done_) return;
          beast::error_code ec2;
          const size_t avail = self->stream_.socket().available(ec2);
          if (ec2 || avail == 0) self->client_gone();
          // Bytes available: a pipelined request; it is read after this response.
        }));
  }

  void do_write() {
    if (out_.empty() || closed_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    current_ = std::move(out_.front());
    out_.pop_front();
    asio::async_write(stream_.socket(), asio::buffer(current_),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) {
                          self->writing_ = false;
                          self->client_gone();
                          return;
                        }
                        if (!self->out_.empty()) {
                          self->do_write();
                          return;
                        }
                        self->writing_ = false;
                        if (self->response_done_) self->after_response();
                      });
  }

  void after_response() {
    if (closed_) return;
    if (!keep_alive_ || !srv_.accepting.load()) {
      // Lingering close: stop sending, then read and drop what the client still sends (e.g. the
      // rest of a body that was too large) so that closing does not reset the connection before
      // the client has read our answer.
      beast::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      stream_.expires_after(std::chrono::seconds(5));
      writer_.reset();  // the response is complete
      drain(0);
      return;
    }
    writer_.reset();
    do_read();
  }

  void drain(uint64_t total) {
    if (closed_ || total > (64u << 20)) {
      close();
      return;
    }
    if (!discard_) discard_ = std::make_unique<std::array<char, 16384>>();
    stream_.async_read_some(asio::buffer(*discard_), [self = shared_from_this(), total](beast::error_code ec, size_t n) {
      if (ec) {
        self->close();
        return;
      }
      self->drain(total + n);
    });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().close(ec);
    writer_.reset();
    out_.clear();
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& srv_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> out_;
  std::string current_;
  std::shared_ptr<Writer> writer_;
  std::unique_ptr<std::array<char, 16384>> discard_;
  bool writing_ = false, closed_ = false, keep_alive_ = true, response_done_ = true;
  uint64_t seq_ = 0;
};

void Writer::send(int status, const std::string& content_type, std::string body, const HeaderList& extra) {
  auto s = session_;
  asio::post(s->executor(), [this, self = shared_from_this(), s, status, content_type, body = std::move(body),
                             extra]() mutable {
    Writer* w = s->writer();
    if (w == nullptr || w->seq_ != seq_ || w->started_ || w->complete_ || gone_) return;
    w->started_ = w->complete_ = true;
    s->enqueue(head(status, content_type, extra, s->keep_alive(),
                    "Content-Length: " + std::to_string(body.size()) + "\r\n") + body);
    s->response_complete();
  });
}

void Writer::start_stream(int status, const std::string& content_type, const HeaderList& extra) {
  auto s = session_;
  asio::post(s->executor(), [this, self = shared_from_this(), s, status, content_type, extra] {
    Writer* w = s->writer();
    if (w == nullptr || w->seq_ != seq_ || w->started_ || gone_) return;
    w->started_ = true;
    s->enqueue(head(status, content_type, extra, s->keep_alive(), "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"));
  });
}

void Writer::write(std::string data) {
  if (data.empty()) return;
  auto s = session_;
  asio::post(s->executor(), [this, self = shared_from_this(), s, data = std::move(data)]() mutable {
    Writer* w = s->writer();
    if (w == nullptr || w->seq_ != seq_ || !w->started_ || w->complete_ || gone_) return;
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    s->enqueue(std::string(size) + data + "\r\n");
  });
}

void Writer::end() {
  auto s = session_;
  asio::post(s->executor(), [this, self = shared_from_this(), s] {
    Writer* w = s->writer();
    if (w == nullptr || w->seq_ != seq_ || !w->started_ || w->complete_ || gone_) return;
    w->complete_ = true;
    s->enqueue("0\r\n\r\n");
    s->response_complete();
  });
}

void Writer::on_disconnect(std::function<void()> fn) {
  auto s = session_;
  asio::post(s->executor(), [this, self = shared_from_this(), s, fn = std::move(fn)]() mutable {
    if (gone_) {
      fn();
      return;
    }
    Writer* w = s->writer();
    if (w == nullptr || w->seq_ != seq_) {
      // The session has moved on (response complete) or closed: nothing to watch.
      if (w == nullptr && !complete_) fn();
      return;
    }
    on_gone_ = std::move(fn);
  });
}

}  // namespace

void HttpServer::Impl::do_accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!accepting.load() || !acceptor.is_open()) return;
    if (!ec) {
      if (n_conn.load() >= opt.max_connections) {
        beast::error_code ignore;
        socket.close(ignore);
      } else {
        ++n_conn;
        beast::error_code ignore;
        socket.set_option(tcp::no_delay(true), ignore);
        auto session = std::make_shared<Session>(std::move(socket), *this);
        {
          std::lock_guard<std::mutex> lk(sessions_mu);
          if (sessions.size() >= 1024 && sessions.size() >= 2 * static_cast<size_t>(n_conn.load()))
            sessions.erase(std::remove_if(sessions.begin(), sessions.end(), [](const auto& w) { return w.expired(); }),
                           sessions.end());
          sessions.push_back(session);
        }
        session->start();
      }
    }
    do_accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {
  beast::error_code ec;
  const auto addr = asio::ip::make_address(impl_->opt.host, ec);
  TRIAD_CHECK(!ec, "bad --host '", impl_->opt.host, "': ", ec.message());
  const tcp::endpoint ep(addr, impl_->opt.port);
  impl_->acceptor.open(ep.protocol(), ec);
  TRIAD_CHECK(!ec, "cannot open a socket: ", ec.message());
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  impl_->acceptor.bind(ep, ec);
  TRIAD_CHECK(!ec, "cannot listen on ", impl_->opt.host, ":", impl_->opt.port, ": ", ec.message());
  impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  TRIAD_CHECK(!ec, "cannot listen: ", ec.message());
  impl_->do_accept();
}

HttpServer::~HttpServer() {
  stop();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
}

uint16_t HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::run() {
  const int n = std::max(1, impl_->opt.io_threads);
  for (int i = 1; i < n; ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
  if (impl_->ioc.stopped()) {
    std::lock_guard<std::mutex> lk(impl_->sessions_mu);
    for (const auto& w : impl_->sessions)
      if (auto s = w.lock()) std::static_pointer_cast<Session>(s)->release_after_stop();
    impl_->sessions.clear();
  }
}

void HttpServer::stop_accepting() {
  asio::post(impl_->ioc, [this] {
    impl_->accepting = false;
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
}

void HttpServer::stop() {
  impl_->accepting = false;
  impl_->ioc.stop();
}

void HttpServer::on_signal(std::function<void(int)> fn) {
  impl_->signals.add(SIGINT);
  impl_->signals.add(SIGTERM);
  impl_->signals.async_wait([fn = std::move(fn)](beast::error_code ec, int sig) {
    if (!ec) fn(sig);
  });
}

int HttpServer::open_connections() const { return impl_->n_conn.load(); }

}  // namespace triad::server
