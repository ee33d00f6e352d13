import ArgumentParser
import Darkroom
import DarkroomPostgres
import Logging

/// The options every command that uses the shared queue takes: where it is, and where results
/// too large for it go.
struct QueueOptions: ParsableArguments {
  @Option(help: "The queue's database: postgres://USER:PASSWORD@HOST:PORT/DATABASE, or ?host=/socket/folder.")
  var queue: String?

  @Option(help: "A folder every machine mounts, for results larger than --max-stored-bytes (the same path everywhere).")
  var sharedFolder: String?

  @Option(
    parsing: .unconditional, help: "Results up to this many bytes are kept in the database (0 to 268435456, default 16777216).")
  var maxStoredBytes: Int = ResultStorage.defaultMaxStoredBytes

  func validate() throws {
    if let queue, queue.isEmpty { throw ValidationError("--queue takes a postgres:// URL") }
    guard (0...ResultStorage.maxStoredBytesLimit).contains(maxStoredBytes) else {
      throw ValidationError("--max-stored-bytes takes 0 to \(ResultStorage.maxStoredBytesLimit), got \(maxStoredBytes)")
    }
    if let sharedFolder, sharedFolder.isEmpty || sharedFolder.contains("\0") {
      throw ValidationError("--shared-folder takes a folder's path")
    }
  }

  /// Fails validation when no --queue was given (for the commands that need one).
  func require() throws {
    guard queue != nil else { throw ValidationError("give the queue's database: --queue postgres://…") }
  }

  /// Connects, prepares the tables (on first use), and runs `body` with the queue. A wrong URL
  /// exits 64; a database that cannot be reached or used exits 75 (try again later), saying why.
  func withQueue<Result: Sendable>(_ command: String, _ body: @Sendable (PostgresJobQueue) async throws -> Result)
    async throws -> Result
  {
    let location: PostgresLocation
    do {
      location = try PostgresLocation(queue ?? "")
    } catch {
      Terminal.error("error: \(error.message)")
      throw ExitCode.validationFailure
    }
    var logger = Logger(label: "darkroom.queue")
    logger.logLevel = .warning
    let storage = ResultStorage(maxStoredBytes: maxStoredBytes, sharedFolder: sharedFolder)
    do {
      return try await PostgresJobQueue.withQueue(at: location, logger: logger, storage: storage, body)
    } catch let error as PipelineError where error.code == .queueUnavailable {
      Terminal.error("darkroom \(command): \(error.message)")
      throw ExitStatus.inUseElsewhere
    }
  }
}
