import DarkroomPostgres
import DarkroomPostgresTestServer
import Logging
import PostgresNIO
import Testing

/// Runs a suite with the process's shared ``PostgresTestServer`` (``PostgresTestServer/current``
/// inside it); each test makes a database of its own on it.
struct WithPostgresServer: SuiteTrait, TestScoping {
  func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
    let server = try await PostgresTestServer.shared()
    try await PostgresTestServer.$current.withValue(server) { try await function() }
  }
}

extension PostgresTestServer {
  @TaskLocal static var current: PostgresTestServer?

  /// The suite's server (see ``WithPostgresServer``).
  static var suite: PostgresTestServer {
    get throws {
      guard let current else { throw Failure(message: "no PostgreSQL server: put the suite under .postgresServer") }
      return current
    }
  }
}

extension Trait where Self == WithPostgresServer {
  /// One PostgreSQL server for the whole suite.
  static var postgresServer: Self { WithPostgresServer() }
}

/// Runs `body` with a queue on a new, empty database of the suite's server (its tables made).
func withNewQueue<T: Sendable>(_ body: @Sendable (PostgresJobQueue) async throws -> T) async throws -> T {
  let location = try await PostgresTestServer.suite.newDatabase()
  return try await PostgresJobQueue.withQueue(at: location) { try await body($0) }
}

/// Runs `body` while another session of the suite's server holds `table` of `location`'s
/// database in ACCESS EXCLUSIVE mode (every statement that reads it waits).
func whileLocked(_ table: String, in location: PostgresLocation, _ body: () async throws -> Void) async throws {
  let logger = Logger(label: "test")
  let locker = try await PostgresConnection.connect(
    configuration: .init(
      unixSocketPath: try PostgresTestServer.suite.sockets + "/.s.PGSQL.5432", username: "darkroom", password: nil,
      database: location.database), id: 9, logger: logger)
  try await locker.query("BEGIN", logger: logger)
  try await locker.query("LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: logger)
  do {
    try await body()
  } catch {
    try? await locker.close()
    throw error
  }
  try await locker.query("COMMIT", logger: logger)
  try await locker.close()
}
