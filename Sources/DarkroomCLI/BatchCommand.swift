import ArgumentParser
import Darkroom
import DarkroomCore
import DarkroomPostgres
import Foundation

/// `darkroom batch status|results|retry BATCH --queue URL`: a batch in the shared queue.
struct BatchCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "batch", abstract: "Follow a batch in the shared queue: its status, its results, its dead jobs.",
    subcommands: [Status.self, Results.self, Retry.self])

  /// The batch argument and the queue options every subcommand takes.
  struct Target: ParsableArguments {
    @Argument(help: "The batch's id (as `darkroom enqueue` prints it) or name.")
    var batch: String

    @OptionGroup var queue: QueueOptions

    func validate() throws { try queue.require() }

    /// Runs `body` with the queue and the batch's id; an unknown batch exits 1 saying so.
    func withBatch<Result: Sendable>(_ command: String, _ body: @Sendable (PostgresJobQueue, UUID) async throws -> Result)
      async throws -> Result
    {
      let name = batch
      do {
        return try await queue.withQueue("batch \(command)") { queue in
          try await body(queue, try await queue.batch(name))
        }
      } catch let error as PipelineError {
        Terminal.error("darkroom batch \(command): \(error.message)")
        throw ExitStatus.inputsFailed
      }
    }
  }

  struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "status",
      abstract: "Print how many of the batch's jobs are queued, running, done and dead, and why the dead ones failed.",
      discussion: "Exit status 0 when every job is done, 1 when any is dead, 3 while jobs are still queued or running.")

    @OptionGroup var target: Target

    @Flag(help: "Wait until every job is done or dead.")
    var wait = false

    func run() async throws {
      let wait = wait
      let status = try await target.withBatch("status") { queue, batch in
        var status = try await queue.status(of: batch)
        while wait, !status.isFinished {
          try await Task.sleep(for: .milliseconds(200))
          status = try await queue.status(of: batch)
        }
        Terminal.out(status.description)
        try await forEachJob(of: batch, states: [.dead], in: queue) { job in
          Terminal.out("dead: \(Terminal.printable(job.source)): \(job.errorCode ?? "?"): \(Terminal.printable(job.error ?? ""))")
        }
        return status
      }
      if status[.dead] > 0 { throw ExitStatus.inputsFailed }
      if !status.isFinished { throw ExitCode(3) }
    }
  }

  struct Results: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "results", abstract: "Download the batch's outputs into a folder, each checked against its SHA-256.",
      discussion: """
        Writes every done job's outputs under the names `darkroom run` gives them. A result \
        whose bytes do not match their checksum is not written and fails the command. Exit \
        status 0 when every job's outputs were written, 1 when any job is dead or any result is \
        damaged, 3 while jobs are still queued or running (what is done is written).
        """)

    @OptionGroup var target: Target

    @Option(name: .shortAndLong, help: "The folder to write the outputs into.")
    var output: String

    func validate() throws {
      guard !output.isEmpty else { throw ValidationError("--output takes a folder") }
    }

    func run() async throws {
      let output = output
      let (written, bytes, damaged, status) = try await target.withBatch("results") { queue, batch in
        try await BatchDownload(queue: queue, batch: batch, output: output).run()
      }
      Terminal.error(
        "darkroom batch results: wrote \(written) file\(written == 1 ? "" : "s") (\(bytes) bytes) into \(output); "
          + "\(status)" + (damaged > 0 ? "; \(damaged) damaged" : ""))
      if damaged > 0 || status[.dead] > 0 { throw ExitStatus.inputsFailed }
      if !status.isFinished { throw ExitCode(3) }
    }
  }

  struct Retry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "retry", abstract: "Queue the batch's dead jobs again, with their attempts counted from zero.")

    @OptionGroup var target: Target

    func run() async throws {
      let count = try await target.withBatch("retry") { queue, batch in try await queue.retry(batch: batch) }
      Terminal.out("darkroom batch retry: \(count) dead job\(count == 1 ? "" : "s") queued again")
    }
  }
}

/// Calls `body` for each of the batch's jobs in `states`, a page at a time.
func forEachJob(
  of batch: UUID, states: Set<JobState>, in queue: any JobQueue, _ body: (JobRecord) async throws -> Void
) async throws {
  var after: Int64 = 0
  while true {
    let page = try await queue.jobs(of: batch, states: states, after: after, limit: 500)
    for job in page { try await body(job) }
    guard let last = page.last, page.count == 500 else { return }
    after = last.id
  }
}

/// Writes a batch's results into a folder: each done job's outputs, checked, written atomically
/// beneath the folder.
struct BatchDownload: Sendable {
  let queue: any JobQueue
  let batch: UUID
  let output: String
  /// Jobs whose outputs are in the folder already (this process made and wrote them), and the
  /// keys (``OutputPattern/key(_:)`` of the lowercased names) of those outputs.
  var skipping: Set<Int64> = []
  var written: Set<UInt64> = []

  /// Files written, their bytes, results refused as damaged, and the batch's status.
  func run() async throws -> (Int, Int, Int, BatchStatus) {
    let status = try await queue.status(of: batch)
    var written = 0
    var bytes = 0
    var damaged = 0
    var page: [JobRecord] = []
    // Two jobs never make one file (the queue names them apart when they are enqueued); should a
    // changed table say otherwise, the second is reported, never written over the first.
    // (Kept as 64-bit keys of the names: a million outputs in 16 MB.)
    var names = self.written
    func flush() async throws {
      let results = try await queue.results(of: page.map(\.id))
      for job in page {
        switch results[job.id] ?? .success([]) {
        case .failure(let error):
          Terminal.error("damaged: \(Terminal.printable(job.source)): \(error.message)")
          damaged += 1
        case .success(let outputs):
          for result in outputs {
            guard names.insert(OutputPattern.key(result.name)).inserted else {
              Terminal.error(
                "damaged: \(Terminal.printable(job.source)): another job of the batch also makes "
                  + "\(Terminal.printable(result.name))")
              damaged += 1
              continue
            }
            do {
              try await Self.write(result, into: output)
              written += 1
              bytes += result.bytes.count
            } catch let error as PipelineError where error.code != .cancelled {
              // One file that cannot be written does not stop the others.
              Terminal.error("failed: \(Terminal.printable(job.source)): \(Terminal.printable(error.message))")
              damaged += 1
            }
          }
        }
      }
      page.removeAll()
    }
    try await forEachJob(of: batch, states: [.done], in: queue) { job in
      guard !skipping.contains(job.id) else { return }
      page.append(job)
      if page.count == 100 { try await flush() }
    }
    try await flush()
    return (written, bytes, damaged, status)
  }

  /// Writes one result beneath `folder` (its name may hold subfolders, never `..` or an absolute
  /// path), replacing a file of that name only when the result may (`writeFailed` otherwise).
  static func write(_ result: JobResult, into folder: String) async throws {
    try await BlockingPool.shared.run {
      do {
        try AtomicFile.write(ImageBytes(result.bytes), named: result.name, in: folder, overwrite: result.overwrite)
      } catch let error as NSError where !result.overwrite && error.domain == NSPOSIXErrorDomain && error.code == Int(EEXIST) {
        throw PipelineError(.writeFailed, "\(folder)/\(result.name) exists and overwrite is off")
      } catch {
        throw PipelineError(.writeFailed, "cannot write \(folder)/\(result.name): \(error.localizedDescription)")
      }
    }
  }
}
