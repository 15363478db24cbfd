//! The whole consumer group on one page, its fragments for refreshing in place, and its JSON
//! twin `/api/group`.

use super::*;
use crate::admin::pages::{
    CommandNotice, GroupMemberRow, GroupMembersFragment, GroupPage, GroupPartitionRow,
    GroupRowsFragment,
};
use crate::group::commands;
use crate::group::view::GroupView;

/// The group as this member sees it now.
pub(super) async fn group_view(state: &AdminState) -> Result<GroupView, AdminError> {
    state
        .group
        .view(&state.pages_pool)
        .await
        .map_err(|e| AdminError::database("group members", e))
}

#[derive(Deserialize)]
pub(super) struct GroupQuery {
    /// A command carried to another member, whose answer the page shows.
    command: Option<String>,
}

#[get("/group")]
pub(super) async fn group_page(
    state: State,
    request: HttpRequest,
    query: web::Query<GroupQuery>,
) -> HttpResponse {
    let page = async {
        let command = match query.command.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => {
                let id = text.parse::<i64>().map_err(|_| {
                    AdminError::BadRequest(format!(
                        "command must be a number, got {:?}",
                        truncate(text)
                    ))
                })?;
                let member = &state.group.member;
                let asked = commands::read(&state.pages_pool, id, &member.group, &member.topic)
                    .await
                    .map_err(|e| AdminError::database("group commands", e))?
                    .ok_or_else(|| AdminError::NotFound(format!("there is no command {id}")))?;
                Some(CommandNotice::of(&asked))
            }
        };
        let view = group_view(&state).await?;
        let layout = layout(&state, &request, format!("Group {}", view.group));
        let mut page = GroupPage::new(layout, &view);
        page.command = command;
        Ok(html(StatusCode::OK, &page))
    };
    page_or_error(&state, &request, page.await)
}

/// The group page's partition rows, for refreshing them in place.
#[get("/fragments/group-rows")]
pub(super) async fn group_rows(state: State, request: HttpRequest) -> HttpResponse {
    let rows = group_view(&state)
        .await
        .map(|view| GroupPartitionRow::list(&view))
        .unwrap_or_default();
    let layout = layout(&state, &request, "");
    html(StatusCode::OK, &GroupRowsFragment { layout, rows })
}

/// The group page's members, for refreshing them in place.
#[get("/fragments/group-members")]
pub(super) async fn group_members(state: State) -> HttpResponse {
    let members = group_view(&state)
        .await
        .map(|view| GroupMemberRow::list(&view))
        .unwrap_or_default();
    html(StatusCode::OK, &GroupMembersFragment { members })
}

#[get("/api/group")]
pub(super) async fn api_group(state: State) -> Result<HttpResponse, AdminError> {
    Ok(HttpResponse::Ok().json(group_view(&state).await?))
}
