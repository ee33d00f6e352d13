import Darkroom
import DarkroomHTTPTestServer
import DarkroomTesting
import Foundation
import Testing

/// Measures how many transfers run at once through the HTTP transport it wraps.
struct MeteredTransport: FetchTransport {
  final class Meter: Sendable {
    private let counts = Protected((current: 0, peak: 0, total: 0))
    func enter() {
      counts.withLock {
        $0.current += 1
        $0.total += 1
        $0.peak = max($0.peak, $0.current)
      }
    }
    func leave() { counts.withLock { $0.current -= 1 } }
    var peak: Int { counts.withLock { $0.peak } }
    var total: Int { counts.withLock { $0.total } }
  }

  let base: HTTPTransport
  let meter = Meter()
  var schemes: Set<String> { base.schemes }
  var identifier: String { base.identifier }

  func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData {
    meter.enter()
    defer { meter.leave() }
    return try await base.fetch(source, limits: limits, context: context)
  }
}

/// Holds every transfer through the HTTP transport it wraps until its gate opens: a test that
/// needs loads to share one transfer opens it once they have all joined, however slowly a loaded
/// machine starts them (with a fixed server delay instead, a load started after the transfer
/// ended made a second request: 1 run in 3 on a busy machine).
struct GatedTransport: FetchTransport {
  let base: HTTPTransport
  let gate = Gate()
  var schemes: Set<String> { base.schemes }
  var identifier: String { base.identifier }

  func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData {
    try await gate.wait()
    return try await base.fetch(source, limits: limits, context: context)
  }
}

/// The loader against a real HTTP server. Part of the serialized "HTTP fetching" suite: its leak
/// checks read a process-wide count of live transfers.
extension HTTPTransportTests {
  func loaderHTTP() -> HTTPTransport {
    var http = HTTPOptions()
    http.allowHosts = ["127.0.0.1"]
    return HTTPTransport(options: http)
  }

  func decodes(in operations: [PipelineOperation<EncodedImage>]) -> Int {
    operations.reduce(0) { count, operation in
      count
        + operation.history.filter {
          guard case .stageStarted(let stage) = $0 else { return false }
          return !stage.joined && (stage.kind == "decode" || stage.fusedKinds.contains("decode"))
        }.count
    }
  }

  @Test("100 concurrent loads of one URL make one request and one decode")
  func hundredLoadsOneRequest() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/one.jpg": .ok(body: image, contentType: "image/jpeg")
    ])
    defer { Task { try? await server.shutdown() } }
    let transport = GatedTransport(base: loaderHTTP())
    let fetch = Fetcher(transports: [transport])
    let thumbnail = Pipeline(name: "thumbnail") {
      fetch
      ImageDecoder()
      Resizer(width: 80)
      ImageEncoder(.png())
    }
    let loader = ImageLoader()
    let source = ImageSource(server.url("/one.jpg"))
    let operations = (0..<100).map { _ in loader.load(source, pipeline: thumbnail) }
    await eventually { loader.scheduler.coalescer.map { $0.joined >= 99 } ?? true }
    transport.gate.open()
    var outputs: [EncodedImage] = []
    for operation in operations { outputs.append(try await operation.value) }
    #expect(server.requestCount("/one.jpg") == 1)
    #expect(decodes(in: operations) == 1)
    #expect(outputs.allSatisfy { $0.bytes == outputs[0].bytes && $0.width == 80 && $0.height == 60 })
    #expect(loader.scheduler.coalescer?.started == loader.scheduler.coalescer.map { _ in 3 })  // fetch, decode+resize, encode
  }

  @Test("pipelines that differ after the decode share the transfer and the decode")
  func sharedPrefixAcrossPipelines() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/p.jpg": .ok(body: image, contentType: "image/jpeg")
    ])
    defer { Task { try? await server.shutdown() } }
    let transport = GatedTransport(base: loaderHTTP())
    let fetch = Fetcher(transports: [transport])
    func sized(_ width: Int) -> Pipeline<ImageSource, EncodedImage> {
      Pipeline(name: "w\(width)", fusion: false) {
        fetch
        ImageDecoder()
        Resizer(width: width)
        ImageEncoder(.png())
      }
    }
    let loader = ImageLoader()
    let source = ImageSource(server.url("/p.jpg"))
    let operations = [64, 128, 256, 64, 128, 256].map { loader.load(source, pipeline: sized($0)) }
    await eventually { loader.scheduler.coalescer.map { $0.joined >= 5 } ?? true }
    transport.gate.open()
    var widths: [Int] = []
    for operation in operations { widths.append(try await operation.value.width) }
    #expect(widths == [64, 128, 256, 64, 128, 256])
    #expect(server.requestCount("/p.jpg") == 1)
    #expect(decodes(in: operations) == 1)
  }

  @Test("network and CPU limits hold over 1,000 mixed loads of 50 URLs")
  func limitsOverHTTP() async throws {
    var routes: [String: TestResponse] = [:]
    for index in 0..<50 {
      routes["/m\(index).jpg"] = .slowHeaders(delay: .milliseconds(index % 5), then: .ok(body: image, contentType: "image/jpeg"))
    }
    let server = try await TestHTTPServer.start(routes: routes)
    defer { Task { try? await server.shutdown() } }
    let transport = MeteredTransport(base: loaderHTTP())
    let fetch = Fetcher(transports: [transport])
    let bytes = Pipeline(name: "bytes") { fetch }
    let small = Pipeline(name: "small") {
      fetch
      ImageDecoder()
      Resizer(width: 32)
      ImageEncoder(.jpeg(quality: 70))
    }
    var configuration = ImageLoader.Configuration()
    configuration.networkLimit = 3
    configuration.cpuLimit = 2
    let loader = ImageLoader(configuration: configuration)
    var encoded: [PipelineOperation<EncodedImage>] = []
    var fetched: [PipelineOperation<FetchedData>] = []
    for index in 0..<1_000 {
      let source = ImageSource(server.url("/m\(index % 50).jpg"))
      let priority = LoadPriority.allCases[index % 3]
      if index % 4 == 0 {
        fetched.append(loader.load(source, pipeline: bytes, priority: priority))
      } else {
        encoded.append(loader.load(source, pipeline: small, priority: priority))
      }
    }
    for operation in encoded { #expect(try await operation.value.width == 32) }
    for operation in fetched { #expect(try await operation.value.bytes.count == image.count) }
    #expect(transport.meter.peak <= 3 && transport.meter.peak >= 1)
    #expect(loader.scheduler.network.peak <= 3 && loader.scheduler.cpu.peak <= 2)
    #expect(loader.scheduler.cpuPool.peakConcurrency <= 2)
    #expect(transport.meter.total < 1_000)  // duplicates in flight shared their transfers
    #expect(loader.activeCount == 0)
    #expect(HTTPTransport.liveTransfers == 0)
  }

  @Test(
    "random cancellations racing real transfers: one terminal event each, no transfer or load left behind",
    .timeLimit(.minutes(3)))
  func cancellationsOverHTTP() async throws {
    var routes: [String: TestResponse] = [:]
    for index in 0..<20 {
      routes["/c\(index).jpg"] = .slowHeaders(
        delay: .milliseconds(index % 4 * 5), then: .ok(body: image, contentType: "image/jpeg"))
    }
    let server = try await TestHTTPServer.start(routes: routes)
    defer { Task { try? await server.shutdown() } }
    let fetch = Fetcher(transports: [loaderHTTP()])
    let thumbnail = Pipeline(name: "cancelled") {
      fetch
      ImageDecoder()
      Resizer(width: 40)
      ImageEncoder(.png())
    }
    var configuration = ImageLoader.Configuration()
    configuration.networkLimit = 4
    let loader = ImageLoader(configuration: configuration)
    var operations: [PipelineOperation<EncodedImage>] = []
    for index in 0..<300 {
      let operation = loader.load(ImageSource(server.url("/c\(index % 20).jpg")), pipeline: thumbnail)
      operations.append(operation)
      if index % 3 != 0 {
        let yields = index % 11
        Task {
          for _ in 0..<yields { await Task.yield() }
          operation.cancel()
        }
      }
    }
    var finished = 0
    for operation in operations {
      if case .success = await operation.result { finished += 1 }
      #expect(operation.history.filter(\.isTerminal).count == 1)
    }
    #expect(finished >= 100)  // every third load was never cancelled
    while loader.scheduler.coalescer?.inFlight != 0 { await Task.yield() }
    #expect(loader.activeCount == 0)
    #expect(loader.scheduler.network.running == 0 && loader.scheduler.network.waiting == 0)
    #expect(loader.scheduler.cpu.running == 0 && loader.scheduler.cpu.waiting == 0)
    while HTTPTransport.liveTransfers != 0 { await Task.yield() }
  }
}
