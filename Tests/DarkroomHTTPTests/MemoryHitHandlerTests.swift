import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Synchronization
import Testing

@testable import DarkroomHTTP

/// Hits answered on the connection's event loop, before Hummingbird's router.
@Suite("darkroom serve answers hits from memory on the connection")
struct MemoryHitHandlerTests {
  @Test("a hit answered on the connection is the router's answer: headers, body, 304, HEAD, request id")
  func sameAnswer() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let path = "/unsafe/fit-in/40x40/0.jpg"
    let rendered = try await running.get(path, headers: ["Accept": "image/webp"])
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 0)
    let hit = try await running.get(path, headers: ["Accept": "image/webp", "X-Request-Id": "client-7"])
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 1)
    #expect(hit.status == 200 && hit.body == rendered.body && !hit.body.isEmpty)
    for name in ["content-type", "etag", "vary", "content-length"] {
      #expect(hit.headers[name] == rendered.headers[name], "\(name)")
    }
    #expect(hit.headers["content-type"] == "image/webp")
    #expect(hit.headers["cache-control"]?.hasPrefix("public, max-age=") == true)
    #expect(hit.headers["x-request-id"] == "client-7")
    #expect(hit.headers["date"]?.hasSuffix(" GMT") == true)
    // The client asked to close: the answer says so, and the connection ends (get reads to the end).
    #expect(hit.headers["connection"] == "close")

    let etag = try #require(rendered.headers["etag"])
    let notModified = try await running.get(path, headers: ["Accept": "image/webp", "If-None-Match": etag])
    #expect(notModified.status == 304 && notModified.body.isEmpty && notModified.headers["etag"] == etag)
    let head = try await running.get(path, method: "HEAD", headers: ["Accept": "image/webp"])
    #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == rendered.headers["content-length"])
    // JPEG is another entry: the first asks the router, the second is answered here.
    let jpeg = try await running.get(path)
    #expect(jpeg.headers["content-type"] == "image/jpeg" && jpeg.body != rendered.body)
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 3)
    #expect(try await running.get(path).body == jpeg.body)
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 4)
    #expect(try await running.metric("darkroom_renders_total") == 2)
    #expect(try await running.metric("darkroom_result_cache_hits_total") == 4)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("what needs the router goes there: a query, another method, /healthz, a URL not answered before")
  func routerKeepsTheRest() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let path = "/unsafe/20x20/0.jpg"
    #expect(try await running.get(path).status == 200)
    #expect(try await running.get(path + "?v=2").status == 200)
    #expect(try await running.get(path, method: "POST").status != 200)
    #expect(try await running.get("/healthz").status == 200)
    #expect(try await running.get("/unsafe/21x21/0.jpg").status == 200)
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 0)
    #expect(try await running.get(path).status == 200)
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 1)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("kept-alive and pipelined connections get their answers in order when hits and renders mix")
  func order() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 3, delay: .milliseconds(300))
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let hit = "/unsafe/33x33/0.jpg"
    #expect(try await running.get(hit).status == 200)
    // A slow render first: the hits pipelined behind it must wait for its answer.
    let pipelined = [
      "/unsafe/44x44/1.jpg", hit, "/unsafe/filters:nope()/0.jpg", hit, "/unsafe/55x55/2.jpg", hit, "/healthz", hit,
    ]
    let (replies, stayedOpen) = try await RawSocket.keepAlive(port: running.port, paths: pipelined, pipelined: true)
    #expect(stayedOpen)
    #expect(replies.map(\.status) == [200, 200, 400, 200, 200, 200, 200, 200])
    let widths = try replies.filter { $0.headers["content-type"] == "image/jpeg" }.map { try size(of: $0.body).0 }
    #expect(widths == [44, 33, 33, 55, 33, 33])
    // One after another on one connection: every hit answered here, the connection kept.
    let before = running.server.eventLoopAnswers.load(ordering: .relaxed)
    let (again, open) = try await RawSocket.keepAlive(port: running.port, paths: Array(repeating: hit, count: 20))
    #expect(open && again.count == 20 && again.allSatisfy { $0.status == 200 && $0.body == replies[1].body })
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == before + 20)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("a client that sends hits without reading is held back: the server stops reading, and no answer is lost")
  func clientThatDoesNotRead() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let path = "/unsafe/8x8/0.jpg"
    #expect(try await running.get(path).status == 200)
    // 20,000 requests of 2 KB: 40 MB, far more than the sockets' buffers hold.
    let count = 20_000
    let request = Array("GET \(path) HTTP/1.1\r\nHost: x\r\nX-Pad: \(String(repeating: "a", count: 2_000))\r\n\r\n".utf8)
    let port = running.port
    let (heldAt, answered) = try await RawSocket.onThread { try Self.sendWithoutReading(request, count: count, port: port) }
    // Held back well before the end: the server stopped reading while its answers went unread.
    #expect(heldAt.map { $0 < count / 2 } == true, "sent \(heldAt.map(String.init) ?? "everything") before being held")
    #expect(answered == count)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("Connection: close on a hit with a body still unread: the whole answer, then an orderly end, not a reset")
  func closeWithUnreadBody() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let path = "/unsafe/600x600/filters:format(png)/0.jpg"
    let rendered = try await running.get(path)
    #expect(rendered.status == 200 && rendered.body.count > 100_000)
    let port = running.port
    for connection in ["close", "keep-alive, Close"] {
      let body = [UInt8](repeating: 0x78, count: 1 << 20)
      let head = "GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: \(connection)\r\nContent-Length: \(body.count)\r\n\r\n"
      let (raw, ending) = try await RawSocket.onThread { () throws -> ([UInt8], Int32) in
        let fd = try RawSocket.connect(port: port)
        defer { close(fd) }
        RawSocket.send(fd, Array(head.utf8) + body)
        var raw: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
          let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
          if count < 0 { return (raw, errno) }
          if count == 0 { return (raw, 0) }
          raw += buffer[..<count]
        }
      }
      #expect(ending == 0, "the connection was reset (errno \(ending)) with \(raw.count) bytes read")
      let reply = try HTTPReply.parse(raw, head: false)
      #expect(reply.status == 200 && reply.body == rendered.body && reply.headers["connection"] == "close")
    }
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 2)
    try await running.stop()
    try await origin.shutdown()
  }

  /// Writes `count` copies of `request` without reading until the connection stays full for a
  /// second (the requests sent by then), then reads and writes together until every answer is
  /// in (the 200s counted).
  private static func sendWithoutReading(_ request: [UInt8], count: Int, port: Int) throws -> (Int?, Int) {
    let fd = try RawSocket.connect(port: port)
    defer { close(fd) }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    var sent = 0
    var offset = 0
    var heldAt: Int?
    var answered = 0
    var tail: [UInt8] = []
    let statusLine = Array("HTTP/1.1 200 OK\r\n".utf8)
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    let deadline = ContinuousClock.now + .seconds(120)
    while answered < count, ContinuousClock.now < deadline {
      if sent < count {
        let wrote = request[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if wrote > 0 {
          offset += wrote
          if offset == request.count { (sent, offset) = (sent + 1, 0) }
          continue
        }
        guard errno == EAGAIN || errno == EWOULDBLOCK else { throw RawSocket.Failure.short }
      }
      let reading = heldAt != nil || sent == count
      var poller = pollfd(fd: fd, events: Int16(reading ? POLLOUT | POLLIN : POLLOUT), revents: 0)
      if !reading {
        if poll(&poller, 1, 1_000) == 0 { heldAt = sent }
        continue
      }
      _ = poll(&poller, 1, 1_000)
      let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if got == 0 { break }
      if got < 0 { continue }
      let window = tail + buffer[..<got]
      answered +=
        window.indices.dropLast(statusLine.count - 1).filter { window[$0..<$0 + statusLine.count].elementsEqual(statusLine) }
        .count
      tail = Array(window.suffix(statusLine.count - 1))
    }
    return (heldAt, answered)
  }
}
