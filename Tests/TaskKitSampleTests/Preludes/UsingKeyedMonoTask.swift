// What the samples of UsingKeyedMonoTask.md use but do not declare.
import TaskKit
