#include "levers/distributed/tcp_store.hpp"

#include "levers/core/error.hpp"

#include <utility>  // Boost 1.74 Asio uses std::exchange without including it

#include <boost/asio.hpp>

#include <condition_variable>
#include <map>
#include <mutex>
#include <sys/socket.h>
#include <thread>
#include <vector>

namespace levers::dist {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

enum Op : std::uint8_t { kHello = 0, kSet = 1, kGet = 2, kAdd = 3 };

// Length-prefixed strings and fixed-size integers on a blocking socket.
void write_u64(tcp::socket& s, std::uint64_t v) { asio::write(s, asio::buffer(&v, sizeof v)); }
std::uint64_t read_u64(tcp::socket& s) {
    std::uint64_t v = 0;
    asio::read(s, asio::buffer(&v, sizeof v));
    return v;
}
void write_str(tcp::socket& s, const std::string& v) {
    write_u64(s, v.size());
    asio::write(s, asio::buffer(v));
}
std::string read_str(tcp::socket& s, std::uint64_t limit = std::uint64_t{1} << 30) {
    const std::uint64_t n = read_u64(s);
    if (n > limit) throw std::runtime_error("oversized message");
    std::string v(n, '\0');
    asio::read(s, asio::buffer(v));
    return v;
}

}  // namespace

struct TcpStore::Server {
    asio::io_context io;
    tcp::acceptor acceptor{io};
    std::string token;
    std::mutex mutex;
    std::condition_variable changed;
    std::map<std::string, std::string> data;
    bool stopping = false;
    int connected = 0;                 // peers whose connection is still open
    std::chrono::milliseconds linger;  // how long the server waits for them to hang up
    std::thread accept_thread;
    std::vector<std::thread> handlers;
    std::vector<std::shared_ptr<tcp::socket>> sockets;

    explicit Server(std::chrono::milliseconds linger_for) : linger(linger_for) {}

    void serve(std::shared_ptr<tcp::socket> sock) {
        struct HangUp {  // however the connection ends
            Server& s;
            ~HangUp() {
                {
                    std::lock_guard lock(s.mutex);
                    --s.connected;
                }
                s.changed.notify_all();
            }
        } hang_up{*this};
        try {
            std::uint8_t op = 0;
            asio::read(*sock, asio::buffer(&op, 1));
            const std::string presented = read_str(*sock, 4096);
            const std::uint8_t accepted = op == kHello && presented == token;
            asio::write(*sock, asio::buffer(&accepted, 1));
            if (!accepted) return;  // a peer without the job's token
            for (;;) {
                asio::read(*sock, asio::buffer(&op, 1));
                const std::string key = read_str(*sock, 4096);
                if (op == kSet) {
                    std::string value = read_str(*sock);
                    {
                        std::lock_guard lock(mutex);
                        data[key] = std::move(value);
                    }
                    changed.notify_all();
                } else if (op == kGet) {
                    const auto wait = std::chrono::milliseconds(read_u64(*sock));
                    std::unique_lock lock(mutex);
                    changed.wait_for(lock, wait, [&] { return stopping || data.contains(key); });
                    const bool found = data.contains(key);
                    const std::uint8_t f = found;
                    const std::string value = found ? data[key] : std::string();
                    lock.unlock();
                    asio::write(*sock, asio::buffer(&f, 1));
                    if (found) write_str(*sock, value);
                } else if (op == kAdd) {
                    const auto delta = static_cast<std::int64_t>(read_u64(*sock));
                    std::int64_t now = 0;
                    {
                        std::lock_guard lock(mutex);
                        std::string& v = data[key];
                        now = (v.empty() ? 0 : std::stoll(v)) + delta;
                        v = std::to_string(now);
                    }
                    changed.notify_all();
                    write_u64(*sock, static_cast<std::uint64_t>(now));
                } else {
                    return;
                }
            }
        } catch (const std::exception&) {
            // The peer went away (or sent garbage): its connection ends.
        }
    }

    void accept_loop() {
        for (;;) {
            auto sock = std::make_shared<tcp::socket>(io);
            boost::system::error_code ec;
            acceptor.accept(*sock, ec);
            if (ec) return;  // closed by the destructor
            std::lock_guard lock(mutex);
            if (stopping) return;
            sockets.push_back(sock);
            ++connected;
            handlers.emplace_back([this, sock] { serve(sock); });
        }
    }

    ~Server() {
        {
            std::unique_lock lock(mutex);
            stopping = true;  // a get still waiting for its key is answered "not set"
            changed.notify_all();
            // The peers' last replies may still be on their way: closing their
            // connections now would fail those ranks' last request. Each hangs
            // up once it is done with the store.
            changed.wait_for(lock, linger, [&] { return connected == 0; });
        }
        boost::system::error_code ec;
        // close() alone does not wake a thread blocked in accept() on Linux; shutdown() does.
        ::shutdown(acceptor.native_handle(), SHUT_RDWR);
        acceptor.close(ec);
        if (accept_thread.joinable()) accept_thread.join();
        for (auto& s : sockets) s->shutdown(tcp::socket::shutdown_both, ec);
        for (auto& t : handlers) t.join();
    }
};

struct TcpStore::Client {
    asio::io_context io;
    tcp::socket socket{io};
    std::mutex mutex;  // one request at a time
};

TcpStore::TcpStore(const std::string& host, int port, bool serve, const std::string& token,
                   std::chrono::milliseconds timeout)
    : timeout_(timeout) {
    LEVERS_CHECK(port > 0 && port < 65536, "store port {} is outside 1..65535 (MASTER_PORT)", port);
    boost::system::error_code ec;
    tcp::endpoint endpoint;
    if (auto address = asio::ip::make_address(host, ec); !ec) {
        endpoint = tcp::endpoint(address, static_cast<unsigned short>(port));
    } else {  // a host name
        asio::io_context io;
        auto found = tcp::resolver(io).resolve(host, std::to_string(port), ec);
        LEVERS_CHECK(!ec && !found.empty(), "cannot resolve MASTER_ADDR '{}': {}", host, ec.message());
        endpoint = *found.begin();
    }
    if (serve) {
        server_ = std::make_unique<Server>(timeout);
        server_->token = token;
        server_->acceptor.open(endpoint.protocol());
        server_->acceptor.set_option(tcp::acceptor::reuse_address(true));
        server_->acceptor.bind(endpoint, ec);
        LEVERS_CHECK(!ec, "cannot listen on {}:{} for the rendezvous store: {}", host, port, ec.message());
        server_->acceptor.listen();
        server_->accept_thread = std::thread([s = server_.get()] { s->accept_loop(); });
    }
    client_ = std::make_unique<Client>();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        client_->socket.connect(endpoint, ec);
        if (!ec) break;
        client_->socket.close();
        LEVERS_CHECK(std::chrono::steady_clock::now() < deadline,
                     "no rendezvous store answered at {}:{} within {} ms (is rank 0 running?): {}", host, port,
                     timeout.count(), ec.message());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    client_->socket.set_option(tcp::no_delay(true));
    const std::uint8_t hello = kHello;
    asio::write(client_->socket, asio::buffer(&hello, 1));
    write_str(client_->socket, token);
    std::uint8_t accepted = 0;
    asio::read(client_->socket, asio::buffer(&accepted, 1), ec);
    LEVERS_CHECK(!ec && accepted == 1, "the rendezvous store at {}:{} refused this rank: wrong job token "
                 "(LEVERS_JOB_TOKEN)", host, port);
}

TcpStore::~TcpStore() {
    boost::system::error_code ec;
    client_->socket.close(ec);
}

void TcpStore::set(const std::string& key, const std::string& value) {
    std::lock_guard lock(client_->mutex);
    const std::uint8_t op = kSet;
    asio::write(client_->socket, asio::buffer(&op, 1));
    write_str(client_->socket, key);
    write_str(client_->socket, value);
}

std::string TcpStore::get(const std::string& key) {
    std::lock_guard lock(client_->mutex);
    const std::uint8_t op = kGet;
    asio::write(client_->socket, asio::buffer(&op, 1));
    write_str(client_->socket, key);
    write_u64(client_->socket, static_cast<std::uint64_t>(timeout_.count()));
    std::uint8_t found = 0;
    asio::read(client_->socket, asio::buffer(&found, 1));
    LEVERS_CHECK(found == 1, "rendezvous store: key '{}' was not set within {} ms", key, timeout_.count());
    return read_str(client_->socket);
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
    std::lock_guard lock(client_->mutex);
    const std::uint8_t op = kAdd;
    asio::write(client_->socket, asio::buffer(&op, 1));
    write_str(client_->socket, key);
    write_u64(client_->socket, static_cast<std::uint64_t>(delta));
    return static_cast<std::int64_t>(read_u64(client_->socket));
}

}  // namespace levers::dist
