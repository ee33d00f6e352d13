import ArgumentParser
import Darkroom
import Foundation

/// `darkroom cache stats|purge|clear|sweep PIPELINE`: inspects and empties the stores a
/// pipeline's cache stages use.
struct CacheCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "cache", abstract: "Inspect and empty the caches of a pipeline file.",
    subcommands: [Stats.self, Purge.self, Clear.self, Sweep.self])

  struct Selection: ParsableArguments {
    @Argument(help: "The pipeline JSON file whose cache stages name the stores.")
    var pipeline: String

    @Option(help: "The directory relative cache directories resolve against (as given to 'darkroom run').")
    var cacheDir: String?

    @Option(help: "Only this store kind: memory, disk or table.")
    var store: String?

    /// The distinct stores of the pipeline's cache stages, and what loading the pipeline opened
    /// (its notify stages' sinks), for the command to close when done.
    func stores() throws -> (stores: [any CacheStore], resources: PipelineResources) {
      let resources = PipelineResources()
      var context = StageBuildContext(cacheDirectory: cacheDir, resources: resources)
      context.opensExistingStoresOnly = true  // a store never made is said to be missing, not made empty
      let set = try PipelineFile.load(pipeline, context: context)
      var seen: Set<String> = []
      var stores: [any CacheStore] = []
      for stage in set.variants.flatMap(\.graph.stages) {
        guard let store = stage.checkpointStore else { continue }
        if let wanted = self.store, store.name != wanted { continue }
        let id = (store as AnyObject?).map { "\(ObjectIdentifier($0).hashValue)" } ?? store.name
        if seen.insert(id).inserted { stores.append(store) }
      }
      if stores.isEmpty {
        Terminal.error("error: \(pipeline) has no cache stage\(store.map { " with a \($0) store" } ?? "")")
        throw ExitCode.validationFailure
      }
      return (stores, resources)
    }
  }

  struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stats", abstract: "Entries and bytes per store.")
    @OptionGroup var selection: Selection
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
      var all: [CacheStatistics] = []
      let (stores, resources) = try selection.stores()
      for store in stores { all.append(try await store.statistics()) }
      await resources.close()
      if json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(all), as: UTF8.self))
        return
      }
      for stats in all {
        let limit =
          stats.byteLimit.map { " of \(ByteCountFormatter.string(fromByteCount: Int64($0), countStyle: .binary))" } ?? ""
        let place = stats.location.map { " in \($0)" } ?? " (this process only)"
        print(
          "\(stats.store)\(place): \(stats.entries) entries, "
            + "\(ByteCountFormatter.string(fromByteCount: Int64(stats.bytes), countStyle: .binary))\(limit)")
      }
    }
  }

  struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "purge", abstract: "Remove every cached variant of the given sources.")
    @OptionGroup var selection: Selection
    @Argument(help: "Sources (paths or URLs, as given to 'darkroom run').") var sources: [String]

    func run() async throws {
      let (stores, resources) = try selection.stores()
      for text in sources {
        // Stores record a file under its resolved path (symlinks and `..` resolved).
        let source = try await BlockingPool.shared.run { ImageSource(text).resolved }
        var removed = 0
        for store in stores { removed += try await store.purge(source: source) }
        Terminal.out("\(Terminal.printable(text)): \(removed) entr\(removed == 1 ? "y" : "ies") removed")
      }
      await resources.close()
    }
  }

  struct Clear: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "clear", abstract: "Remove every entry (on a terminal, after asking; --yes to not ask).")
    @OptionGroup var selection: Selection
    @Flag(name: .shortAndLong, help: "Do not ask first.") var yes = false

    func run() async throws {
      let (stores, resources) = try selection.stores()
      if !yes, Terminal.stdinIsTerminal {
        var counts: [String] = []
        for store in stores {
          let stats = try await store.statistics()
          counts.append("\(stats.entries) entries of \(store.name)\(stats.location.map { " in \($0)" } ?? "")")
        }
        Terminal.error("Remove \(counts.joined(separator: ", "))? [y/N] ", newline: false)
        guard let answer = readLine(), ["y", "yes"].contains(answer.lowercased()) else {
          Terminal.error("nothing removed")
          await resources.close()
          throw ExitCode.failure
        }
      }
      for store in stores {
        let before = try await store.statistics()
        try await store.removeAll()
        print("\(store.name): \(before.entries) entries removed")
      }
      await resources.close()
    }
  }

  struct Sweep: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "sweep", abstract: "Remove files a disk store's index does not know (left by killed processes).")
    @OptionGroup var selection: Selection

    func run() async throws {
      let (stores, resources) = try selection.stores()
      for store in stores {
        guard let disk = store as? DiskStore else { continue }
        print("disk \(disk.directory): \(try await disk.removeStrayFiles()) stray files removed")
      }
      await resources.close()
    }
  }
}
