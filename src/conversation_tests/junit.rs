//! The run as JUnit XML (`--junit FILE`), the report CI systems show per test: a suite per
//! file, a case per test, a failure carrying every failed step.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::FileReport;
use super::runner::Outcome;

pub fn render(reports: &[FileReport]) -> anyhow::Result<String> {
    let mut report = Report::new("zaguan test");
    for file in reports {
        let mut suite = TestSuite::new(file.path.display().to_string());
        for result in &file.results {
            let status = match result.outcome {
                Outcome::Passed => TestCaseStatus::success(),
                Outcome::Failed | Outcome::NeedsRecording => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    let first = result
                        .failures
                        .first()
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    let message = match result.outcome {
                        Outcome::NeedsRecording => format!("needs recording: {first}"),
                        _ => first,
                    };
                    status.set_message(message.lines().next().unwrap_or_default());
                    status.set_description(
                        result
                            .failures
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("\n"),
                    );
                    status
                }
            };
            let mut case = TestCase::new(result.name.clone(), status);
            case.set_classname(file.path.display().to_string());
            case.set_time(Duration::from_secs_f64(result.seconds));
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    Ok(report.to_string()?)
}
