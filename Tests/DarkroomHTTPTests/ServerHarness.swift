import Darkroom
import DarkroomHTTP
import DarkroomHTTPTestServer
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// An ImageServer in a real Hummingbird application on an ephemeral loopback port, in a service
/// group that the test shuts down as SIGTERM would.
final class RunningServer: Sendable {
  let server: ImageServer
  let port: Int
  private let group: ServiceGroup
  private let task: Task<Void, any Error>

  private init(server: ImageServer, port: Int, group: ServiceGroup, task: Task<Void, any Error>) {
    self.server = server
    self.port = port
    self.group = group
    self.task = task
  }

  static func start(_ configuration: ServerConfiguration, sharedCache: (any SharedResultStore)? = nil) async throws
    -> RunningServer
  {
    var configuration = configuration
    configuration.bind = "127.0.0.1:0"
    let logger = Logger(label: "darkroom.serve.test")
    let server = try ImageServer(configuration: configuration, logger: logger, sharedCache: sharedCache)
    let router = Router(context: ImageServerContext.self)
    server.addRoutes(to: router)
    let (ports, portSink) = AsyncStream<Int>.makeStream()
    let app = Application(
      router: router, server: server.serverBuilder,
      configuration: .init(address: .hostname("127.0.0.1", port: 0)),
      onServerRunning: { channel in
        portSink.yield(channel.localAddress?.port ?? 0)
        portSink.finish()
      }, logger: logger)
    var groupConfiguration = ServiceGroupConfiguration(
      services: [.init(service: server), .init(service: app)], gracefulShutdownSignals: [], logger: logger)
    groupConfiguration.maximumGracefulShutdownDuration = .seconds(20)
    let group = ServiceGroup(configuration: groupConfiguration)
    let task = Task { try await group.run() }
    var port = 0
    for await bound in ports { port = bound }
    return RunningServer(server: server, port: port, group: group, task: task)
  }

  /// Shuts down gracefully (what SIGTERM does) and waits until the group has ended.
  func stop() async throws {
    await group.triggerGracefulShutdown()
    try await task.value
  }

  func get(_ path: String, method: String = "GET", headers: [String: String] = [:]) async throws -> HTTPReply {
    try await HTTPReply.fetch(port: port, path: path, method: method, headers: headers)
  }

  /// Sends a GET for `path` on a connection of its own and returns the socket without reading
  /// the answer: the test hangs up with `close`.
  func abandonableRequest(_ path: String) async throws -> Int32 {
    let port = port
    return try await RawSocket.onThread { () throws -> Int32 in
      let fd = try RawSocket.connect(port: port)
      RawSocket.send(fd, Array("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
      return fd
    }
  }

  /// The value of a metric line (`darkroom_renders_total`) in `/metrics`.
  func metric(_ line: String) async throws -> Double {
    let text = String(decoding: try await get("/metrics").body, as: UTF8.self)
    return text.split(separator: "\n").first { $0.hasPrefix(line + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
      ?? 0
  }
}

/// A response read off a real socket: HTTP/1.1, one request per connection.
struct HTTPReply: Sendable {
  var status: Int
  /// Header names lower-cased.
  var headers: [String: String]
  var body: [UInt8]

  static func fetch(port: Int, path: String, method: String = "GET", headers: [String: String] = [:]) async throws -> HTTPReply {
    var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
    for (name, value) in headers { request += "\(name): \(value)\r\n" }
    request += "\r\n"
    let raw = try await RawSocket.exchange(port: port, request: Array(request.utf8))
    return try parse(raw, head: method == "HEAD")
  }

  static func parse(_ raw: [UInt8], head: Bool) throws -> HTTPReply {
    let separator: [UInt8] = [13, 10, 13, 10]
    guard let end = raw.indices.first(where: { raw[$0...].starts(with: separator) }) else { throw RawSocket.Failure.short }
    let lines = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
    guard let statusLine = lines.first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else {
      throw RawSocket.Failure.short
    }
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    var body = Array(raw[(end + 4)...])
    if headers["transfer-encoding"] == "chunked" { body = dechunked(body) }
    return HTTPReply(status: status, headers: headers, body: head ? [] : body)
  }

  static func dechunked(_ data: [UInt8]) -> [UInt8] {
    var result: [UInt8] = []
    var index = 0
    while index < data.count {
      guard let lineEnd = data[index...].firstIndex(of: 13),
        let size = Int(String(decoding: data[index..<lineEnd], as: UTF8.self), radix: 16),
        size > 0, lineEnd + 2 + size <= data.count
      else { break }
      result += data[(lineEnd + 2)..<(lineEnd + 2 + size)]
      index = lineEnd + 2 + size + 2
    }
    return result
  }
}

/// Blocking POSIX sockets on their own threads (never on the cooperative pool).
enum RawSocket {
  enum Failure: Error { case connect, short }

  static func connect(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard fd >= 0, connected == 0 else {
      close(fd)
      throw Failure.connect
    }
    return fd
  }

  static func send(_ fd: Int32, _ bytes: [UInt8]) {
    var sent = 0
    while sent < bytes.count {
      let wrote = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
      if wrote <= 0 { return }
      sent += wrote
    }
  }

  static func readAll(_ fd: Int32) -> [UInt8] {
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
      let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if count <= 0 { break }
      result += buffer[..<count]
    }
    return result
  }

  /// Sends one GET per path on one kept-alive connection, each after the previous answer has
  /// been read (by its Content-Length); the answers, and whether the server kept the connection
  /// open to the end.
  static func keepAlive(port: Int, paths: [String], pipelined: Bool = false) async throws -> (
    replies: [HTTPReply], stayedOpen: Bool
  ) {
    try await onThread {
      let fd = try connect(port: port)
      defer { close(fd) }
      var replies: [HTTPReply] = []
      var pending: [UInt8] = []
      var buffer = [UInt8](repeating: 0, count: 65_536)
      let requests = paths.map { Array("GET \($0) HTTP/1.1\r\nHost: x\r\n\r\n".utf8) }
      // Pipelined: every request in one write, before any answer is read.
      if pipelined { send(fd, requests.flatMap { $0 }) }
      for request in requests {
        if !pipelined { send(fd, request) }
        while true {
          if let reply = try? HTTPReply.parse(pending, head: false),
            let length = reply.headers["content-length"].flatMap(Int.init),
            reply.body.count >= length
          {
            let headLength = pending.count - reply.body.count
            replies.append(HTTPReply(status: reply.status, headers: reply.headers, body: Array(reply.body.prefix(length))))
            pending.removeFirst(headLength + length)
            break
          }
          let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
          if count <= 0 { return (replies, false) }
          pending += buffer[..<count]
        }
      }
      return (replies, true)
    }
  }

  /// Connects, sends `bytes` (half a request, say) and waits for the server to close the
  /// connection; false when it is still open after `limit` seconds.
  static func closedByServer(port: Int, after bytes: [UInt8], limit: Int) async throws -> Bool {
    try await onThread {
      let fd = try connect(port: port)
      defer { close(fd) }
      var timeout = timeval(tv_sec: limit, tv_usec: 0)
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
      send(fd, bytes)
      var byte: UInt8 = 0
      while true {
        let count = read(fd, &byte, 1)
        if count == 0 { return true }
        if count < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
      }
    }
  }

  /// Sends `request` and reads until the server closes.
  static func exchange(port: Int, request: [UInt8]) async throws -> [UInt8] {
    try await onThread {
      let fd = try connect(port: port)
      defer { close(fd) }
      send(fd, request)
      return readAll(fd)
    }
  }

  static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onOwnThread(body)
  }
}

/// Images the tests serve: made by the project itself with libvips.
enum ServedFixtures {
  static func jpeg(width: Int = 640, height: Int = 480) throws -> [UInt8] {
    Array(try TestImages.encoded(.jpeg(quality: 90), width: width, height: height).data)
  }

  static func png(width: Int = 64, height: Int = 64, alpha: Bool) throws -> [UInt8] {
    Array(try TestImages.encoded(.png(), width: width, height: height, alpha: alpha).data)
  }

  /// A configuration reading from `origin` (a loopback test server), unsafe URLs on.
  static func configuration(origin: String) -> ServerConfiguration {
    var configuration = ServerConfiguration()
    configuration.origin = origin
    configuration.privateHosts = ["127.0.0.1"]
    configuration.allowUnsafe = true
    return configuration
  }

  /// An origin serving `images` small JPEGs (`/0.jpg`, `/1.jpg`, …), each after `delay`.
  static func slowOrigin(images: Int, delay: Duration) async throws -> TestHTTPServer {
    let origin = try await TestHTTPServer.start()
    let body = try jpeg(width: 64, height: 64)
    for index in 0..<images {
      origin.setRoute("/\(index).jpg", .slowHeaders(delay: delay, then: .ok(body: body, contentType: "image/jpeg")))
    }
    return origin
  }

  /// A fresh temporary folder.
  static func folder() throws -> String {
    let path = NSTemporaryDirectory() + "darkroom-serve-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }
}
