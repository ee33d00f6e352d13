import DarkroomCore
import Testing

@Suite("Operation state machine")
struct OperationStateMachineTests {
  static let stage = StageInfo(index: 0, kind: "k", identifier: "k()")
  static let error = PipelineError(.corruptImage, "bad")
  static let summary = OutputSummary(width: 1, height: 2)

  /// Every input, named for the table below.
  static let inputs: [(String, OperationStateMachine.Input)] = [
    ("start", .start), ("stageStarted", .stageStarted(stage)), ("stageFinished", .stageFinished(stage, .milliseconds(3))),
    ("note", .note("n")), ("progress", .progress(received: 10, expected: 100)),
    ("cache", .cache(CacheEvent(.hit, store: "memory", stageIndex: 1))), ("outputReady", .outputReady),
    ("willFinishSucceeded", .willFinishSucceeded(summary)),
    ("fail", .fail(error)), ("cancel", .cancel),
  ]

  /// A machine driven into each status.
  static func machine(in status: OperationStatus) -> OperationStateMachine {
    var machine = OperationStateMachine()
    let path: [OperationStateMachine.Input]
    switch status {
    case .pending: path = []
    case .running: path = [.start]
    case .finishing: path = [.start, .outputReady]
    case .finished: path = [.start, .outputReady, .willFinishSucceeded(summary)]
    case .failed: path = [.start, .fail(error)]
    case .cancelled: path = [.cancel]
    }
    for input in path { machine.handle(input) }
    return machine
  }

  /// Expected (status after, action names) for every status × input; anything missing is "ignored".
  static let table: [OperationStatus: [String: (OperationStatus, [String])]] = [
    .pending: [
      "start": (.running, ["emit:started"]),
      "fail": (.failed, ["emit:failed", "deliverFailure"]),
      "cancel": (.cancelled, ["emit:cancelled", "deliverCancellation"]),
    ],
    .running: [
      "stageStarted": (.running, ["emit:stageStarted"]),
      "stageFinished": (.running, ["emit:stageFinished"]),
      "note": (.running, ["emit:note"]),
      "progress": (.running, ["emit:progress"]),
      "cache": (.running, ["emit:cache"]),
      "outputReady": (.finishing, ["emit:willFinish", "runWillFinish"]),
      "fail": (.failed, ["emit:failed", "deliverFailure"]),
      "cancel": (.cancelled, ["emit:cancelled", "deliverCancellation"]),
    ],
    .finishing: [
      "note": (.finishing, ["emit:note"]),
      "cache": (.finishing, ["emit:cache"]),
      "willFinishSucceeded": (.finished, ["emit:finished", "deliverResult"]),
      "fail": (.failed, ["emit:failed", "deliverFailure"]),
      "cancel": (.cancelled, ["emit:cancelled", "deliverCancellation"]),
    ],
  ]

  static func names(_ actions: [OperationStateMachine.Action]) -> [String] {
    actions.map {
      switch $0 {
      case .emit(let event): "emit:\(event.name)"
      case .runWillFinish: "runWillFinish"
      case .deliverResult: "deliverResult"
      case .deliverFailure: "deliverFailure"
      case .deliverCancellation: "deliverCancellation"
      }
    }
  }

  @Test("every status × input transition matches the table", arguments: OperationStatus.allCases)
  func transitions(from status: OperationStatus) {
    for (name, input) in Self.inputs {
      var machine = Self.machine(in: status)
      #expect(machine.status == status)
      let actions = machine.handle(input)
      let expected = Self.table[status]?[name] ?? (status, [])
      #expect(machine.status == expected.0, "\(status) + \(name)")
      #expect(Self.names(actions) == expected.1, "\(status) + \(name)")
    }
  }

  @Test("terminal states ignore everything: exactly one terminal event")
  func exactlyOneTerminalEvent() {
    // Every sequence of up to four inputs yields at most one terminal event, and a terminal event
    // is always the last event emitted.
    func explore(_ machine: OperationStateMachine, depth: Int, terminalSeen: Int) {
      guard depth > 0 else { return }
      for (_, input) in Self.inputs {
        var next = machine
        let events = next.handle(input).compactMap { action -> OperationEvent? in
          if case .emit(let event) = action { return event }
          return nil
        }
        let terminals = terminalSeen + events.filter(\.isTerminal).count
        #expect(terminals <= 1)
        if terminalSeen == 1 { #expect(events.isEmpty) }
        explore(next, depth: depth - 1, terminalSeen: terminals)
      }
    }
    explore(OperationStateMachine(), depth: 4, terminalSeen: 0)
  }

  @Test("willFinish always comes before finished")
  func willFinishBeforeFinished() {
    var machine = OperationStateMachine()
    machine.handle(.start)
    // Cannot finish without passing through finishing.
    #expect(machine.handle(.willFinishSucceeded(Self.summary)).isEmpty)
    #expect(machine.status == .running)
    #expect(Self.names(machine.handle(.outputReady)) == ["emit:willFinish", "runWillFinish"])
    #expect(Self.names(machine.handle(.willFinishSucceeded(Self.summary))) == ["emit:finished", "deliverResult"])
  }
}
