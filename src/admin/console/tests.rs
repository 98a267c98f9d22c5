use super::*;

/// Every page renders with the shapes the handlers give it.
#[test]
fn the_pages_render() {
    let signed = json!({"operator": "Marta", "csrf": "x", "page": "conversations"});
    let conversation = json!({
        "wa_id": "34600111222", "dialog_state": ["appointment_assistant"], "idle": "3h 05m",
        "idle_seconds": 11100, "lang": "es", "pending_action": null, "handoff": null,
        "handoff_requested": {"at": "2026-11-26T10:00:00Z", "reason": "Quiere una persona"},
        "name": "Lucía",
    });
    let mut list = signed.clone();
    list["conversations"] = json!([conversation]);
    list["filters"] =
        json!({"state": "", "idle_for": "", "handoff": "", "role": "", "lang": "", "q": ""});
    list["agents"] = json!(["primary_assistant", "appointment_assistant"]);
    list["page"] = json!(2);
    list["more"] = json!(true);
    list["query"] = json!("state=");
    let html = render("conversations.html", list).unwrap_or_else(|e| match e {
        ConsoleError::Render(why) => panic!("{why}"),
        _ => panic!("not a render error"),
    });
    assert!(html.0.contains("Quiere una persona"));
    let mut one = signed.clone();
    one["wa_id"] = json!("34600111222");
    one["c"] = conversation.clone();
    one["role"] = json!("prospect");
    one["tokens_today"] = json!(0);
    one["outbox"] =
        json!([{"part": 0, "parts": 1, "status": "sent", "attempts": 1, "error": null, "at": "x"}]);
    one["messages"] = json!([
        {"role": "human", "content": "hola", "at": "x", "agent": null, "tool_calls": []},
        {"role": "ai", "content": "", "at": "x", "agent": "primary_assistant",
         "tool_calls": [{"name": "ToAppointment_Assistant", "args": {}, "args_text": "{}"},
                        {"name": "list_available_slots", "args": {}, "args_text": "{}"}]},
        {"role": "tool", "content": "Huecos", "at": "x", "agent": null, "tool_calls": []},
    ]);
    let html = render("conversation.html", one).unwrap_or_else(|e| match e {
        ConsoleError::Render(why) => panic!("{why}"),
        _ => panic!("not a render error"),
    });
    assert!(html.0.contains("handed over"));
}
