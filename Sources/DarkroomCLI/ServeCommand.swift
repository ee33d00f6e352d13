import ArgumentParser
import Darkroom
import DarkroomHTTP
import Foundation
import Hummingbird
import Logging
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
      64 when the command line is wrong.
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
    let server: ImageServer
    do {
      server = try ImageServer(configuration: settings, logger: logger)
    } catch {
      Terminal.error("error: \(error.message)")
      throw ExitStatus.invalidPipeline
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
      services: [.init(service: server), .init(service: app), .init(service: DrainNotice(server: server))],
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
