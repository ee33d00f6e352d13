import ArgumentParser
import Darkroom
import DarkroomHTTP
import DarkroomPostgres
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceLifecycle

/// `darkroom serve`: the image server (thumbor URLs and presets) on Hummingbird.
struct ServeCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "serve",
    abstract: "Serve images over HTTP: thumbor URLs and presets, with a result cache and admission control.",
    discussion: """
      URLs: /{signature|unsafe}/[trim/][AxB:CxD/][fit-in/][-]Wx[-]H/[halign/][valign/][smart/][filters:…/]IMAGE \
      and /{signature|unsafe}/p/{preset}/IMAGE. Also /healthz, /readyz and /metrics. See Docs/Server.md.

      Settings (config file keys; flags override the file):
      \(ServeCommand.settingsHelp)

      Exit status: 0 after a clean shutdown (SIGTERM or SIGINT), 2 when the configuration is invalid, \
      64 when the command line is wrong, 75 when the --shared-cache database cannot be reached at start.
      """
  )

  @Option(name: .long, help: "A JSON configuration file (keys below).")
  var config: String?
  @Option(name: .long, help: "Where to listen, HOST:PORT (default 127.0.0.1:8080; port 0: any free port).")
  var bind: String?
  @Option(name: .long, help: "The folder of preset pipeline files.")
  var presets: String?
  @Option(name: .long, help: "The secret URLs are signed with (prefer the config file: the command line is visible to others).")
  var key: String?
  @Flag(name: .long, help: "Serve /unsafe/ URLs.")
  var allowUnsafe = false
  @Option(name: .long, help: "A host image URLs may name (repeat for more; *.example.com for subdomains).")
  var allowHost: [String] = []
  @Option(name: .long, help: "The base URL image paths are resolved against.")
  var origin: String?
  @Option(name: .long, help: "A local folder image paths are read from.")
  var root: String?
  @Option(name: .long, help: "A folder for the result cache's disk level.")
  var cacheDir: String?
  @Option(
    name: .long,
    help:
      "A PostgreSQL database (postgres://…) whose result cache this instance shares with others: one render per image in the cluster."
  )
  var sharedCache: String?
  /// Connections of the shared cache's pool beyond one per render slot.
  static let sharedCacheSpareConnections = 8

  @Flag(name: .long, help: "Validate the configuration and exit.")
  var checkConfig = false
  @Option(name: .long, help: "The log level: trace, debug, info, notice, warning, error, critical (default info).")
  var logLevel: String = "info"

  static var settingsHelp: String {
    ServerConfiguration.specs.map { spec in
      let value = spec.defaultValue.map { " (default \($0.jsonText))" } ?? ""
      return "  \(spec.name): \(spec.type.expectation)\(value). \(spec.summary)"
    }.joined(separator: "\n")
  }

  /// The file's settings with the flags applied.
  func settings() throws(PipelineError) -> ServerConfiguration {
    var settings =
      try config.map { path throws(PipelineError) in try ServerConfiguration.load(contentsOf: path) } ?? ServerConfiguration()
    if let bind { settings.bind = bind }
    if let presets { settings.presets = presets }
    if let key { settings.key = key }
    if allowUnsafe { settings.allowUnsafe = true }
    if !allowHost.isEmpty { settings.allowHosts += allowHost }
    if let origin { settings.origin = origin }
    if let root { settings.root = root }
    if let cacheDir { settings.cacheDir = cacheDir }
    try settings.validate()
    return settings
  }

  func run() async throws {
    guard let level = Logger.Level(rawValue: logLevel) else {
      throw ValidationError("unknown --log-level \(logLevel); use trace, debug, info, notice, warning, error or critical")
    }
    let settings: ServerConfiguration
    do {
      settings = try self.settings()
    } catch {
      Terminal.error("error: \(error.message)")
      throw ExitStatus.invalidPipeline
    }
    // The shared cache's URL is checked with the rest of the configuration.
    var sharedLocation: PostgresLocation?
    if let sharedCache {
      do throws(PipelineError) {
        sharedLocation = try PostgresLocation(sharedCache)
      } catch {
        Terminal.error("error: --shared-cache: \(error.message)")
        throw ExitCode.validationFailure
      }
    }
    if checkConfig {
      print("configuration is valid")
      return
    }
    LoggingSystem.bootstrap { label in
      var handler = StreamLogHandler.standardError(label: label)
      handler.logLevel = level
      return handler
    }
    let logger = Logger(label: "darkroom.serve")
    // The shared result cache: a PostgreSQL client and the store's listener run as services
    // beside the server (started first, so they stop last).
    var sharedServices: [ServiceGroupConfiguration.ServiceConfiguration] = []
    var sharedStore: PostgresResultStore?
    if let location = sharedLocation {
      do {
        // Reached once now (a database that cannot be reached fails at start, with its cause),
        // and its tables made or migrated before the first request.
        try await PostgresJobQueue.withQueue(at: location, logger: logger) { _ in }
      } catch let error as PipelineError {
        Terminal.error("error: --shared-cache: \(error.message)")
        throw error.code == .queueUnavailable ? ExitStatus.inUseElsewhere : ExitCode.validationFailure
      }
      // Renders hold no connection (a claim is a row); lookups and stores share the pool.
      // The server ends a statement before the store's 3-second limit gives up on it.
      var configuration = location.configuration(statementTimeout: .milliseconds(2_500))
      configuration.options.maximumConnections = settings.concurrency + Self.sharedCacheSpareConnections
      let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
      // A claim outlasts the longest render (the time limit) before it lapses.
      let store = PostgresResultStore(
        client: client, logger: logger, claimLength: .milliseconds(Int(settings.timeout * 1000)) + .seconds(10))
      sharedServices = [.init(service: client), .init(service: store)]
      sharedStore = store
    }
    let server: ImageServer
    do {
      server = try ImageServer(configuration: settings, logger: logger, sharedCache: sharedStore)
    } catch {
      Terminal.error("error: \(error.message)")
      // A broken installation (libvips cannot be loaded) is not a bad configuration.
      throw error.code == .libraryUnavailable ? ExitCode.failure : ExitStatus.invalidPipeline
    }
    for (name, problem) in server.presets?.reload() ?? [:] {
      Terminal.error("warning: preset \(name) does not validate: \(problem.message)")
    }
    guard let (host, port) = settings.address else { throw ExitStatus.invalidPipeline }
    let router = Router(context: ImageServerContext.self)
    server.addRoutes(to: router)
    let app = Application(
      router: router, server: server.serverBuilder(serverName: "darkroom"),
      configuration: .init(address: .hostname(host, port: port), serverName: "darkroom"),
      onServerRunning: { channel in
        let bound = channel.localAddress?.port ?? port
        Terminal.out("darkroom serve: listening on http://\(host):\(bound)")
      },
      logger: logger
    )
    var groupConfiguration = ServiceGroupConfiguration(
      services: sharedServices + [.init(service: server), .init(service: app), .init(service: DrainNotice(server: server))],
      gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    groupConfiguration.maximumGracefulShutdownDuration = .milliseconds(Int(settings.shutdownGrace * 1000))
    try await ServiceGroup(configuration: groupConfiguration).run()
  }
}

/// The first service to hear of shutdown: the server stops reporting ready at once, while the
/// application finishes what is in flight.
struct DrainNotice: Service {
  let server: ImageServer

  func run() async throws {
    try? await gracefulShutdown()
    server.beginDraining()
  }
}
