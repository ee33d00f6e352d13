import ArgumentParser
import Darkroom
import DarkroomCore
import DarkroomCurl
import Dispatch

#if canImport(Glibc)
  import Glibc
#endif

/// The `darkroom` runner: runs pipeline files over inputs, validates them, lists stages.
@main
struct DarkroomCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "darkroom",
    abstract: "Run Darkroom image pipelines over files, folders and URLs.",
    discussion: """
      Exit status: 0 when every input succeeded, 1 when any input failed, 2 when a pipeline file is \
      invalid, 64 when the command line is wrong, 75 when an image table is in use by another \
      process or the job queue's database cannot be reached, 128 + N when stopped by signal N (130, 143).
      """,
    // `darkroom --version` also names libvips (main() answers it): opening libvips here would
    // cost every command its ~15 ms.
    version: "darkroom \(DarkroomCommand.version)",
    subcommands: [
      RunCommand.self, ValidateCommand.self, StagesCommand.self, SchemaCommand.self, CacheCommand.self, ServeCommand.self,
      QueueCommand.self, EnqueueCommand.self, WorkerCommand.self, BatchCommand.self,
    ]
  )

  /// The runner's version (`darkroom --version`): the issue the project's work has reached.
  static let version = "0.17.0"

  /// The process's entry point: the command runs on the cooperative pool while the main thread
  /// waits for it.
  ///
  /// Not an `async` main: Swift parks an async main's thread with `dispatch_main()`, whose
  /// `pthread_exit()` unwinds the main thread's stack at the start of every command. That loaded
  /// libgcc_s and read about 1 MB of the executable's unwinding tables (a tenth of case H's peak
  /// memory above the C loop's, Docs/Performance.md). Nothing in the runner uses the main queue
  /// or the main actor, which a waiting main thread would never serve.
  static func main() {
    #if canImport(Glibc)
      // glibc gives every thread that allocates its own heap arena; with the blocking pool, the
      // cooperative pool and libvips' workers that is many half-empty arenas. Two are plenty
      // for image-per-thread work and keep peak memory down (measured in Docs/Performance.md).
      // mallopt lives in <malloc.h>, which the Glibc module does not import; look it up instead.
      if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") {
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        let arenaMaxParameter: Int32 = -8  // M_ARENA_MAX
        _ = unsafeBitCast(symbol, to: Mallopt.self)(arenaMaxParameter, 2)
      }
    #endif
    // Before any thread or descriptor exists: a closed standard stream is opened on /dev/null
    // first, so that no descriptor the threads open lands on 0, 1 or 2.
    Terminal.ignoreBrokenPipes()
    Terminal.openClosedStandardStreams()
    // libcurl loads while the command line is parsed (Docs/Performance.md, "Eighth stop").
    if mayFetchOverHTTP(CommandLine.arguments) { Curl.startLoading() }
    let finished = DispatchSemaphore(value: 0)
    Task.detached {
      await runCommandLine()
      finished.signal()
    }
    finished.wait()
    LibraryStarts.stopBeforeExit()
  }

  /// Whether a command line is a `run` that names a URL other than `file://`, or an input list
  /// (which may hold URLs): such a run is about to fetch over HTTP. Only a guess, made before the
  /// command line is parsed: a wrong one costs a load of libcurl on an idle core, or nothing.
  static func mayFetchOverHTTP(_ arguments: [String]) -> Bool {
    guard arguments.count > 2, arguments[1] == RunCommand.configuration.commandName else { return false }
    return arguments.dropFirst(2).contains { argument in
      argument == "--input-list" || argument.hasPrefix("--input-list=")
        || (argument.contains("://") && !argument.lowercased().hasPrefix("file://"))
    }
  }

  /// A `run` command line parsed with `run` as the root command, or nil for anything but a run
  /// to start (an error, `--help`, `--generate-completion-script`), which the whole command tree
  /// then parses again for its message.
  ///
  /// ArgumentParser's parse of the whole tree builds every subcommand's configuration and tries
  /// the command line as a completion-script request too: 29 % of its time in a one-image run
  /// (Docs/Performance.md, "Tenth stop"). `run` names `darkroom` as its super-command, which skips
  /// the completion check when `run` is the root (and is read nowhere else).
  static func parsedQuickly(_ arguments: [String]) -> RunCommand? {
    guard arguments.first == RunCommand.configuration.commandName else { return nil }
    return (try? RunCommand.parseAsRoot(Array(arguments.dropFirst()))) as? RunCommand
  }

  /// Parses the command line and runs the command it names.
  private static func runCommandLine() async {
    // Swift repairs an argument that is not UTF-8 with U+FFFD, which can name another file that
    // exists (`a\xFF.png` would run `a\u{FFFD}.png`): such a command line is refused instead.
    if let bad = Terminal.firstArgumentNotUTF8() {
      Terminal.error(
        "error: argument \(bad) is not valid UTF-8; give such files through a folder (names are read as bytes there) or rename them"
      )
      LibraryStarts.stopBeforeExit()
      exit(withError: ExitCode.validationFailure)
    }
    let arguments = Array(CommandLine.arguments.dropFirst())
    // As ArgumentParser reads it: `--version` before any `--`, after any subcommand too.
    if arguments.prefix(while: { $0 != "--" }).contains("--version") {
      print("darkroom \(version) (libvips \(Vips.version))")
      return
    }
    // A run stops in order on SIGINT and SIGTERM from here on: a signal while the command line
    // is parsed, the pipeline loaded or the inputs listed still ends with the summary.
    let signals = arguments.first == RunCommand.configuration.commandName ? StopSignals() : nil
    let (parsed, folded) = FoldedArguments.fold(arguments)
    do {
      var command = try parsedQuickly(parsed) ?? parseAsRoot(parsed)
      switch command {
      case var run as RunCommand:
        run.input.inputs = folded.unfold(run.input.inputs)
        try await run.run(signals: signals ?? StopSignals())
      case var enqueue as EnqueueCommand:
        enqueue.input.inputs = folded.unfold(enqueue.input.inputs)
        try await enqueue.run()
      case var validate as ValidateCommand:
        validate.files = folded.unfold(validate.files)
        try validate.run()
      case var purge as CacheCommand.Purge:
        purge.sources = folded.unfold(purge.sources)
        try await purge.run()
      case var asyncCommand as any AsyncParsableCommand:
        try await asyncCommand.run()
      default:
        try command.run()
      }
    } catch {
      LibraryStarts.stopBeforeExit()
      exit(withError: error)
    }
  }
}

/// Exit statuses shared by the subcommands.
enum ExitStatus {
  static let inputsFailed = ExitCode(1)
  static let invalidPipeline = ExitCode(2)
  /// A resource the run needs is held by another process (an image table another run has
  /// open): trying again later can succeed (`EX_TEMPFAIL` of sysexits.h).
  static let inUseElsewhere = ExitCode(75)
}
