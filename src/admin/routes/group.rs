//! The whole consumer group on one page, its fragments for refreshing in place, and its JSON
//! twin `/api/group`.

use super::*;
use crate::admin::pages::{
    GroupMemberRow, GroupMembersFragment, GroupPage, GroupPartitionRow, GroupRowsFragment,
};
use crate::group::view::GroupView;

/// The group as this member sees it now.
pub(super) async fn group_view(state: &AdminState) -> Result<GroupView, AdminError> {
    state
        .group
        .view(&state.pages_pool)
        .await
        .map_err(|e| AdminError::database("group members", e))
}

#[get("/group")]
pub(super) async fn group_page(state: State, request: HttpRequest) -> HttpResponse {
    let page = async {
        let view = group_view(&state).await?;
        let layout = layout(&state, &request, format!("Group {}", view.group));
        Ok(html(StatusCode::OK, &GroupPage::new(layout, &view)))
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
