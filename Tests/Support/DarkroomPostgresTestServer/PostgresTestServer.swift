import CFileShim
import DarkroomCore
import DarkroomPostgres
import Foundation
import Logging
import PostgresNIO

#if canImport(Glibc)
  import Glibc
#endif

/// A real PostgreSQL server for the tests: a new cluster in a temporary folder (`initdb`),
/// listening on a Unix socket there (and, when asked, on TCP at given addresses), run as the
/// `postgres` user when the tests run as root (PostgreSQL refuses root), stopped when the suite
/// ends. Each test gets a database of its own.
///
/// Debian's `postgresql` package provides the programs (`scripts/install-deps.sh` installs it).
public final class PostgresTestServer: Sendable {
  public let folder: String
  let programs: String
  let owner: String?
  /// The IP addresses it also listens on (port 5432), with every connection logged.
  public let addresses: [String]

  private init(folder: String, programs: String, owner: String?, addresses: [String]) {
    self.folder = folder
    self.programs = programs
    self.owner = owner
    self.addresses = addresses
  }

  var data: String { folder + "/data" }
  /// The folder of the server's Unix socket (`?host=` of a `postgres://` URL).
  public var sockets: String { folder + "/sockets" }

  /// Starts a new cluster; with `addresses`, it also listens on TCP port 5432 at each of them,
  /// lets any client of the networks they are on in without a password (`samenet`), and logs
  /// every connection (``log()`` tells where they came from).
  public static func start(listeningOn addresses: [String] = []) async throws -> PostgresTestServer {
    let programs = try findPrograms()
    let folder = NSTemporaryDirectory() + "darkroom-pg-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: folder + "/sockets", withIntermediateDirectories: true)
    let owner: String? = geteuid() == 0 ? "postgres" : nil
    if let owner {
      for path in [folder, folder + "/sockets"] {
        try FileManager.default.setAttributes([.ownerAccountName: owner], ofItemAtPath: path)
      }
    }
    let server = PostgresTestServer(folder: folder, programs: programs, owner: owner, addresses: addresses)
    try await server.run(
      "initdb", ["-D", server.data, "-U", "darkroom", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"])
    if !addresses.isEmpty {
      let access = try FileHandle(forWritingTo: URL(fileURLWithPath: server.data + "/pg_hba.conf"))
      try access.seekToEnd()
      try access.write(contentsOf: Data("host all darkroom samenet trust\n".utf8))
      try access.close()
    }
    try await server.startServer()
    return server
  }

  private func startServer() async throws {
    let logging = addresses.isEmpty ? "" : " -c log_connections=on"
    _ = try await run(
      "pg_ctl",
      [
        "-D", data, "-w", "-t", "60", "-l", folder + "/server.log", "-o",
        "-c listen_addresses='\(addresses.joined(separator: ","))'\(logging) -k \(sockets) -p 5432 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
        "start",
      ])
  }

  /// What the server has logged so far.
  public func log() -> String {
    (try? String(contentsOfFile: folder + "/server.log", encoding: .utf8)) ?? ""
  }

  /// Stops the server as an administrator would (`pg_ctl stop -m fast`: every client is
  /// disconnected, what was committed is kept), calls `whileDown`, and starts it again.
  public func restart(whileDown: @Sendable () async throws -> Void = {}) async throws {
    _ = try await run("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"])
    try await whileDown()
    try await startServer()
  }

  /// Stops the server at once and removes its folder.
  public func stop() async {
    _ = try? await run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"])
    try? FileManager.default.removeItem(atPath: folder)
  }

  /// The location of a new, empty database (made over a connection: a spawned `createdb` would
  /// copy the test process's descriptors, image tables' locks among them, for a moment).
  public func newDatabase() async throws -> PostgresLocation {
    let name = "t" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    let configuration = PostgresConnection.Configuration(
      unixSocketPath: sockets + "/.s.PGSQL.5432", username: "darkroom", password: nil, database: "postgres")
    let connection = try await PostgresConnection.connect(
      configuration: configuration, id: 1, logger: Logger(label: "darkroom.test.postgres"))
    do {
      try await connection.query("CREATE DATABASE \(unescaped: name)", logger: Logger(label: "darkroom.test.postgres"))
    } catch {
      try? await connection.close()
      throw error
    }
    try await connection.close()
    return try PostgresLocation("postgres://darkroom@/\(name)?host=\(sockets)")
  }

  /// Runs one of PostgreSQL's programs (as `owner` when set) and waits for it on a thread of
  /// its own (never on the cooperative pool), with `posix_spawn` and `waitpid`. Its output goes
  /// to a file: a server it starts keeps no pipe of ours open.
  @discardableResult
  func run(_ program: String, _ arguments: [String]) async throws -> String {
    let executable = programs + "/" + program
    let command =
      owner.map { ["/usr/bin/setpriv", "--reuid=\($0)", "--regid=\($0)", "--init-groups", executable] } ?? [executable]
    let log = folder + "/\(program)-\(UUID().uuidString).out"
    return try await withCheckedThrowingContinuation { continuation in
      let thread = Thread {
        continuation.resume(
          with: Result {
            let status = try Self.spawnAndWait(command + arguments, output: log)
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            guard status == 0 else { throw Failure(message: "\(program) exited \(status): \(text)") }
            return text
          })
      }
      thread.start()
    }
  }

  /// Starts `command` with its output appended to `output` and waits for it; its exit status.
  private static func spawnAndWait(_ command: [String], output: String) throws -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    // Nothing else of the test process goes with it: a server started by pg_ctl lives on, and a
    // pipe another test reads to its end (a child's output) would never end while it did.
    guard dr_spawn_close_from(&actions, 3) == 0 else {
      throw Failure(message: "cannot spawn \(command[0]) without the test's descriptors")
    }
    let argv = command.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
    guard spawned == 0 else { throw Failure(message: "cannot start \(command[0]): \(String(cString: strerror(spawned)))") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
      guard errno == EINTR else { throw Failure(message: "waitpid failed for \(command[0]): errno \(errno)") }
    }
    // WIFEXITED / WEXITSTATUS, which Swift does not import.
    return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
  }

  public struct Failure: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
    public init(message: String) { self.message = message }
  }

  /// The newest PostgreSQL's programs (`/usr/lib/postgresql/N/bin`, Debian's layout).
  private static func findPrograms() throws -> String {
    let root = "/usr/lib/postgresql"
    let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
    guard let newest = versions.last, FileManager.default.isExecutableFile(atPath: "\(root)/\(newest)/bin/initdb") else {
      throw Failure(message: "PostgreSQL is not installed (scripts/install-deps.sh installs Debian's postgresql)")
    }
    return "\(root)/\(newest)/bin"
  }
}

extension PostgresTestServer {
  /// One server for every test of the process that needs no server of its own (each test still
  /// gets a database of its own): a cluster per suite or test made the whole suite start about
  /// fifteen clusters at once, and their `initdb`s starved the databases already running past
  /// the queue's 15-second limit. Started on first use, stopped when the process exits.
  public static func shared() async throws -> PostgresTestServer {
    try await SharedServer.instance.server()
  }

  /// Stops the server at once from a process that is exiting (no task can be awaited there).
  fileprivate func stopBlocking() {
    let command = owner.map { ["/usr/bin/setpriv", "--reuid=\($0)", "--regid=\($0)", "--init-groups"] } ?? []
    _ = try? Self.spawnAndWait(
      command + [programs + "/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"], output: "/dev/null")
    try? FileManager.default.removeItem(atPath: folder)
  }
}

/// Starts the shared server once, however many tests ask at once.
private actor SharedServer {
  static let instance = SharedServer()
  /// The server to stop when the process exits.
  static let started = Protected<PostgresTestServer?>(nil)
  private var starting: Task<PostgresTestServer, any Error>?

  func server() async throws -> PostgresTestServer {
    if let starting { return try await starting.value }
    let task = Task {
      let server = try await PostgresTestServer.start()
      Self.started.withLock { $0 = server }
      atexit { SharedServer.started.value?.stopBlocking() }
      return server
    }
    starting = task
    return try await task.value
  }
}
